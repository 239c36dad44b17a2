package source

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func TestParseRejectsWhatCannotBeHonoured(t *testing.T) {
	for _, tt := range []struct {
		annotation, value, problem string
	}{
		{wellknown.ReplicateKeys, " , ", "lists no key"},
		{wellknown.ReplicateKeys, "ca.crt, tls key", `"tls key" is not a valid Secret or ConfigMap key`},
		{wellknown.CopyLabels, "courier.dev/protect", "never copied"},
		{wellknown.CopyLabels, "app.kubernetes.io/managed-by", "never copied"},
		{wellknown.CopyAnnotations, "courier.dev/*", "courier's own keys"},
		{wellknown.CopyAnnotations, "cache.courier.dev/*", "courier's own keys"},
		{wellknown.CopyAnnotations, "kubectl.kubernetes.io/last-applied-configuration", "never copied"},
		{wellknown.CopyLabels, "*", "not a valid key"},
		{wellknown.CopyLabels, "Bad_Prefix/*", "not a valid prefix"},
		{wellknown.CopyLabels, "a/b/c", "not a valid key"},
		{wellknown.CopyLabels, "", "lists no key"},
		{wellknown.CopyAnnotations, "replicator.v1.mittwald.de/*", "another replication tool"},
		{wellknown.CopyAnnotations, "reflector.v1.k8s.emberstack.com/reflects", "never copied"},
	} {
		_, err := Parse(map[string]string{tt.annotation: tt.value})
		var e *Error
		if !errors.As(err, &e) || e.Annotation != tt.annotation || !strings.Contains(e.Problem, tt.problem) {
			t.Errorf("%s=%q: got %v, want an error on that annotation containing %q", tt.annotation, tt.value, err, tt.problem)
		}
	}
}

func TestSpecPicksKeysAndMetadata(t *testing.T) {
	spec, err := Parse(map[string]string{
		wellknown.ReplicateKeys:   "tls.crt, ca.crt,ca.crt",
		wellknown.CopyLabels:      "argocd.argoproj.io/secret-type, team.example.com/*, app.kubernetes.io/*",
		wellknown.CopyAnnotations: "note",
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ca.crt", "tls.crt"}, spec.Keys); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
	data := spec.SecretData(map[string][]byte{"ca.crt": []byte("c"), "tls.crt": []byte("t"), "tls.key": []byte("k")})
	if diff := cmp.Diff(map[string][]byte{"ca.crt": []byte("c"), "tls.crt": []byte("t")}, data); diff != "" {
		t.Errorf("data (-want +got):\n%s", diff)
	}
	if got := spec.Missing(func(k string) bool { return k == "ca.crt" }); !cmp.Equal(got, []string{"tls.crt"}) {
		t.Errorf("missing = %v, want [tls.crt]", got)
	}
	all := []content.Entry{{Key: "ca.crt", Digest: "1"}, {Key: "tls.key", Digest: "2"}}
	if got := spec.Entries(all); !cmp.Equal(got, all[:1]) {
		t.Errorf("entries = %v", got)
	}

	labels := map[string]string{
		"argocd.argoproj.io/secret-type": "repository", "team.example.com/owner": "a", "team.example.com": "x",
		"app.kubernetes.io/name": "db", wellknown.ManagedBy: "Helm", wellknown.Protect: "true", "other": "o",
	}
	rec := spec.Copied(labels, map[string]string{"note": "n", "other": "o"})
	want := Record{
		Labels:      map[string]string{"argocd.argoproj.io/secret-type": "repository", "team.example.com/owner": "a", "app.kubernetes.io/name": "db"},
		Annotations: map[string]string{"note": "n"},
	}
	if diff := cmp.Diff(want, rec); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if got := RecordOf(map[string]string{wellknown.CopiedMetadata: rec.Encode()}); !cmp.Equal(got, rec) {
		t.Errorf("the record does not survive its annotation: %v", got)
	}
}

func TestApplyReplacesThePreviousCopy(t *testing.T) {
	prev := Record{Labels: map[string]string{"gone": "1", "kept": "1"}}
	want := Record{Labels: map[string]string{"kept": "2"}}
	labels := map[string]string{"gone": "1", "kept": "1", "theirs": "t"}
	annotations := map[string]string{wellknown.CopiedMetadata: prev.Encode()}
	Apply(labels, annotations, prev, want)
	if diff := cmp.Diff(map[string]string{"kept": "2", "theirs": "t"}, labels); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
	if annotations[wellknown.CopiedMetadata] != want.Encode() || !want.Carried(labels, annotations) {
		t.Errorf("annotations = %v", annotations)
	}
	Apply(labels, annotations, want, Record{})
	if _, ok := annotations[wellknown.CopiedMetadata]; ok || labels["kept"] != "" {
		t.Errorf("copying nothing any more left %v %v", labels, annotations)
	}
}

func TestTypeOfAReplicaHoldingSomeKeys(t *testing.T) {
	keys := func(v string) Spec {
		s, err := Parse(map[string]string{wellknown.ReplicateKeys: v})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tt := range []struct {
		name string
		spec Spec
		typ  corev1.SecretType
		want corev1.SecretType
	}{
		{"every key keeps the type", Spec{}, corev1.SecretTypeTLS, corev1.SecretTypeTLS},
		{"a CA bundle without its private key is Opaque", keys("ca.crt, tls.crt"), corev1.SecretTypeTLS, corev1.SecretTypeOpaque},
		{"both TLS keys keep the type", keys("tls.crt, tls.key"), corev1.SecretTypeTLS, corev1.SecretTypeTLS},
		{"docker config without its key is Opaque", keys("other"), corev1.SecretTypeDockerConfigJson, corev1.SecretTypeOpaque},
		{"basic-auth with its username keeps the type", keys("username"), corev1.SecretTypeBasicAuth, corev1.SecretTypeBasicAuth},
		{"basic-auth with neither username nor password is Opaque", keys("ca.crt"), corev1.SecretTypeBasicAuth, corev1.SecretTypeOpaque},
		{"a bootstrap token is not validated by the API server: its type stays", keys("token-id"), corev1.SecretTypeBootstrapToken, corev1.SecretTypeBootstrapToken},
		{"Opaque stays Opaque", keys("a"), corev1.SecretTypeOpaque, corev1.SecretTypeOpaque},
		{"a ConfigMap has no type", keys("a"), "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.spec.Type(tt.typ); got != tt.want {
				t.Errorf("Type(%q) = %q, want %q", tt.typ, got, tt.want)
			}
		})
	}
}

func TestRecordWithCarriesTheSelectorsKeys(t *testing.T) {
	r := Record{Labels: map[string]string{"copied": "x"}}
	got := r.With(map[string]string{"team": "a", "env": "prod", "other": "y"}, []string{"team", "env", "absent"})
	want := Record{Labels: map[string]string{"copied": "x", "team": "a", "env": "prod"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(r.Labels) != 1 {
		t.Errorf("With modified its receiver: %v", r.Labels)
	}
	if got := (Record{}).With(nil, []string{"team"}); got.Encode() != "" {
		t.Errorf("nothing to carry: got %v", got)
	}
}
