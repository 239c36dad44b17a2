package reloader

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func TestVersionOf(t *testing.T) {
	all := inputs.Ref{Kind: wellknown.KindSecret, Name: "db"}
	some := inputs.Ref{Kind: wellknown.KindSecret, Name: "db", Keys: []string{"b", "a"}}
	same := inputs.Ref{Kind: wellknown.KindSecret, Name: "db", Keys: []string{"a", "b"}}
	other := inputs.Ref{Kind: wellknown.KindSecret, Name: "db", Keys: []string{"a"}}
	optional := inputs.Ref{Kind: wellknown.KindSecret, Name: "db", Keys: []string{"a", "b"}, Optional: true}
	if versionOf(some, "u", "12") != versionOf(same, "u", "12") {
		t.Error("the same keys in another order made another version")
	}
	for _, r := range []inputs.Ref{all, other, optional} {
		if versionOf(r, "u", "12") == versionOf(some, "u", "12") {
			t.Errorf("%+v and %+v consume differently but made one version", r, some)
		}
	}
	if versionOf(some, "u", "12") == versionOf(some, "u", "13") {
		t.Error("two resourceVersions made one version")
	}
	if versionOf(all, "u", "12") == versionOf(all, "u2", "12") {
		t.Error("two objects of one name at one resourceVersion (an etcd restored, a cluster restored into) made one version")
	}
	for _, rv := range []string{"", "1,2", "a=b", "1:2"} {
		if got := versionOf(all, "u", rv); got != "" {
			t.Errorf("resourceVersion %q recorded as %q; it cannot be parsed back", rv, got)
		}
	}
	const inputs = "key=k1,installation=courier,secret/db=0123456789abcdef"
	v := versions{"secret/db": versionOf(some, "u", "12"), "configmap/app": versionOf(all, "u2", "7")}
	if got := parseVersions(v.encode(inputs), inputs); !cmp.Equal(got, v) {
		t.Errorf("encode then parse: %v, want %v", got, v)
	}
	if got := parseVersions(v.encode(inputs), inputs+",configmap/app=0123456789abcdef"); got != nil {
		t.Errorf("versions written with another baseline (an older courier wrote it since, or a person) stood: %v", got)
	}
	if got := parseVersions("secret/a=1", inputs); got != nil {
		t.Errorf("versions naming no baseline stood: %v", got)
	}
	if got := parseVersions("inputs="+baselineID(inputs)+",secret/a=1, junk ,=2,configmap/b=", inputs); !cmp.Equal(got, versions{"secret/a": "1"}) {
		t.Errorf("entries that cannot be read are dropped: %v", got)
	}
}

// An input the baseline keeps an older digest of than the one observed (a
// rollout held back) gets no version: a restart reads it, so its change
// is not lost.
func TestVersionsRecordOnlyWhatTheBaselineRecords(t *testing.T) {
	v := versions{"secret/a": "5", "secret/b": "6", "secret/c": "7"}
	observed := baseline{"secret/a": "new-a", "secret/b": "new-b", "secret/c": "new-c"}
	written := baseline{"secret/a": "new-a", "secret/b": "old-b"}
	if got := v.of(written, observed); !cmp.Equal(got, versions{"secret/a": "5"}) {
		t.Errorf("versions of the baseline written: %v, want secret/a's alone", got)
	}
}

// A restarted courier reads an input the cache holds the metadata of only
// when it moved since its digest in the baseline was made
// (courier.dev/config-versions), not at every start: a labels-only write,
// which writes no baseline, costs one read per restart until the next
// baseline; a change is read and rolled out, and recorded at its version.
func TestARestartReadsOnlyTheInputsThatMovedSinceTheBaseline(t *testing.T) {
	f, v1, d := readingFixture(t)
	f.metadataOnly(t, v1)
	reads := f.reads
	restart := func() {
		t.Helper()
		c, err := New(f.client, f.inf.Workloads(), f.inf.Secrets.Informer(), f.inf.ConfigMaps.Informer(), f.recorder, prometheus.NewRegistry(), zap.NewNop(), f.c.opts)
		if err != nil {
			t.Fatal(err)
		}
		f.c = c
	}
	// stores the workload as patch left it
	apply := func(patch map[string]string) {
		t.Helper()
		d = d.DeepCopy()
		for _, k := range []string{wellknown.ConfigInputs, wellknown.ConfigVersions} {
			metav1.SetMetaDataAnnotation(&d.ObjectMeta, k, patch[k])
		}
		f.put(t, d)
	}

	ref := inputs.Ref{Kind: wellknown.KindSecret, Name: "db"}
	recorded := func(patch map[string]string) string {
		return parseVersions(patch[wellknown.ConfigVersions], patch[wellknown.ConfigInputs])["secret/db"]
	}
	patches := f.sync(t)
	if len(patches) != 1 || recorded(patches[0]) != versionOf(ref, "u", "1") || reads() != 1 {
		t.Fatalf("first sight wrote %v after %d reads; want a baseline recording secret/db at version 1, after one read", patches, reads())
	}
	apply(patches[0])

	restart()
	if got := f.sync(t); len(got) != 0 || reads() != 0 {
		t.Fatalf("after a restart: %v after %d reads; want nothing written and nothing read", got, reads())
	}

	write := func(s *corev1.Secret) {
		t.Helper()
		if _, err := f.client.CoreV1().Secrets("app").Update(t.Context(), s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		f.metadataOnly(t, s)
	}
	v2 := v1.DeepCopy()
	v2.ResourceVersion, v2.Labels = "2", map[string]string{"team": "a"}
	write(v2)
	restart()
	if got := f.sync(t); len(got) != 0 || reads() != 1 {
		t.Fatalf("a labels-only write, then a restart: %v after %d reads; want nothing written after one read", got, reads())
	}
	restart()
	if got := f.sync(t); len(got) != 0 || reads() != 1 {
		t.Fatalf("restarted again: %v after %d reads; want the moved input read again (no baseline was written)", got, reads())
	}

	v3 := v2.DeepCopy()
	v3.ResourceVersion, v3.Data["k"] = "3", []byte("v3")
	write(v3)
	restart()
	patches = f.sync(t)
	if len(patches) != 1 || patches[0]["rollout"] != "yes" || recorded(patches[0]) != versionOf(ref, "u", "3") || reads() != 1 {
		t.Fatalf("a change while courier was down: %v after %d reads; want one rollout recording secret/db at version 3, after one read", patches, reads())
	}
	apply(patches[0])
	restart()
	if got := f.sync(t); len(got) != 0 || reads() != 0 {
		t.Fatalf("after the rollout and a restart: %v after %d reads; want nothing", got, reads())
	}
}
