package role

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// obj builds a Secret's metadata in namespace ns from alternating keys and
// values: a key starting with "label:" is a label, any other an annotation.
func obj(ns string, kv ...string) *metav1.ObjectMeta {
	m := &metav1.ObjectMeta{Namespace: ns, Name: "db", Labels: map[string]string{}, Annotations: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		if k, ok := cutLabel(kv[i]); ok {
			m.Labels[k] = kv[i+1]
		} else {
			m.Annotations[kv[i]] = kv[i+1]
		}
	}
	return m
}

func cutLabel(k string) (string, bool) {
	const p = "label:"
	if len(k) > len(p) && k[:len(p)] == p {
		return k[len(p):], true
	}
	return k, false
}

// TestOf is the table of what an object is to courier: one row per
// combination of features that meet on one object (source × pull × protect
// × replicate-keys × compat tool × installation × namespace allowed or not).
func TestOf(t *testing.T) {
	const (
		to        = wellknown.ReplicateTo
		protect   = "label:" + wellknown.Protect
		keys      = wellknown.ReplicateKeys
		mFrom     = source.MittwaldReplicateFrom
		mTo       = source.MittwaldReplicateTo
		mAllowed  = source.MittwaldAllowed
		rReflects = source.ReflectorReflects
		rAllowed  = source.ReflectorAllowed
		rAuto     = source.ReflectorAutoEnabled
	)
	allowed := func(ns string) bool { return ns == "platform" || ns == "team-a" }
	native := Config{Allowed: allowed, Namespace: "courier"}
	all := Config{Allowed: allowed, Namespace: "courier", Compat: source.Compat{Replicator: true, Reflector: true, Reloader: true}}
	owned := func(m *metav1.ObjectMeta) *metav1.ObjectMeta {
		m.OwnerReferences = []metav1.OwnerReference{{Kind: "ExternalSecret", Name: "db"}}
		return m
	}

	tests := []struct {
		name string
		m    *metav1.ObjectMeta
		typ  corev1.SecretType
		cfg  Config
		want Role
	}{
		{"plain object", obj("platform"), "", native, Role{Allowed: true}},
		{"plain object elsewhere", obj("team-b"), "", native, Role{}},

		// Sources.
		{"source", obj("platform", to, "env=prod"), "", native,
			Role{Kind: Source, Pushes: true, Allowed: true, Keep: Values}},
		{"source with replicate-keys", obj("platform", to, "*", keys, "ca.crt"), corev1.SecretTypeTLS, native,
			Role{Kind: Source, Pushes: true, Allowed: true, Keep: Values}},
		{"source outside --source-namespaces", obj("team-b", to, "*"), "", native,
			Role{Kind: Source, Pushes: true, Problem: SourceNotAllowed}},
		{"ServiceAccount token source", obj("platform", to, "*"), corev1.SecretTypeServiceAccountToken, native,
			Role{Kind: Source, Pushes: true, Allowed: true, Problem: SourceNotReplicable, Keep: Values}},
		{"not allowed wins over not replicable", obj("team-b", to, "*"), corev1.SecretTypeServiceAccountToken, native,
			Role{Kind: Source, Pushes: true, Problem: SourceNotAllowed}},

		// Protection.
		{"protected source", obj("platform", to, "*", protect, "true"), "", native,
			Role{Kind: Source, Pushes: true, Protected: true, Allowed: true, Keep: Values}},
		{"protected, replicated nowhere", obj("platform", protect, "true"), "", native,
			Role{Kind: Source, Protected: true, Allowed: true, Keep: Values}},
		{"protect outside --source-namespaces", obj("team-b", protect, "true"), "", native,
			Role{Kind: Source}},
		{"protect on an owned object", owned(obj("platform", protect, "true")), "", native,
			Role{Kind: Source, Allowed: true, Keep: Values}},
		{"protect not true", obj("platform", protect, "yes"), "", native, Role{Allowed: true}},

		// Compat pushes and pull permissions.
		{"kubernetes-replicator push without compat", obj("platform", mTo, "a"), "", native, Role{Allowed: true}},
		{"kubernetes-replicator push under compat", obj("platform", mTo, "a"), "", all,
			Role{Kind: Source, Pushes: true, Allowed: true, Keep: Values}},
		{"Reflector auto push under compat", obj("platform", rAllowed, "true", rAuto, "true"), "", all,
			Role{Kind: Source, Pushes: true, AllowsPulls: true, Allowed: true, Keep: Values}},
		{"allows pulls only", obj("platform", mAllowed, "true"), "", all,
			Role{Kind: Source, AllowsPulls: true, Allowed: true, Keep: Values}},
		{"allows pulls outside --source-namespaces", obj("team-b", mAllowed, "true"), "", all,
			Role{Kind: Source, AllowsPulls: true}},

		// Pulls.
		{"pull without compat", obj("team-b", mFrom, "platform/db"), "", native, Role{}},
		{"kubernetes-replicator pull", obj("team-b", mFrom, "platform/db"), "", all,
			Role{Kind: PullTarget, PullRef: "platform/db", PullVia: mFrom}},
		{"Reflector pull, bare name", obj("team-b", rReflects, "db"), "", all,
			Role{Kind: PullTarget, PullRef: "team-b/db", PullVia: rReflects}},
		{"pull in an allowed namespace", obj("team-a", mFrom, "platform/db"), "", all,
			Role{Kind: PullTarget, Allowed: true, PullRef: "platform/db", PullVia: mFrom}},
		{"a source that also pulls stays a source", obj("platform", to, "*", rReflects, "other/db"), "", all,
			Role{Kind: Source, Pushes: true, Allowed: true, PullRef: "other/db", PullVia: rReflects, Keep: Values}},
		{"a protected source that also pulls stays protected", obj("platform", to, "*", protect, "true", mFrom, "other/db"), "", all,
			Role{Kind: Source, Pushes: true, Protected: true, Allowed: true, PullRef: "other/db", PullVia: mFrom, Keep: Values}},
		{"protected only, and pulls", obj("platform", protect, "true", mFrom, "other/db"), "", all,
			Role{Kind: Source, Protected: true, Allowed: true, PullRef: "other/db", PullVia: mFrom, Keep: Values}},
		{"allows pulls and pulls", obj("platform", mAllowed, "true", mFrom, "other/db"), "", all,
			Role{Kind: Source, AllowsPulls: true, Allowed: true, PullRef: "other/db", PullVia: mFrom, Keep: Values}},
		{"a source outside --source-namespaces that pulls", obj("team-b", to, "*", mFrom, "platform/db"), "", all,
			Role{Kind: Source, Pushes: true, Problem: SourceNotAllowed, PullRef: "platform/db", PullVia: mFrom}},
		{"compat source with replicate-keys that pulls", obj("platform", mTo, "a", keys, "ca.crt", rReflects, "x/y"), corev1.SecretTypeTLS, all,
			Role{Kind: Source, Pushes: true, Allowed: true, PullRef: "x/y", PullVia: rReflects, Keep: Values}},

		// Courier's own objects.
		{"replica of this installation", obj("team-b", wellknown.Source, "platform/db", wellknown.Installation, "courier", "label:"+wellknown.Replica, "true"), "", native,
			Role{Kind: Replica}},
		{"replica of another installation", obj("team-b", wellknown.Source, "platform/db", wellknown.Installation, "team-courier"), "", native,
			Role{Kind: Replica}},
		{"replica carrying a selector is no source", obj("platform", wellknown.Source, "other/db", to, "*"), "", native,
			Role{Kind: Replica, Pushes: true, Allowed: true}},
		{"replica labelled protect is not protected", obj("platform", wellknown.Source, "other/db", protect, "true"), "", native,
			Role{Kind: Replica, Allowed: true}},
		{"backup", obj("platform", wellknown.BackupOf, "db", "label:"+wellknown.Backup, "true", "label:"+wellknown.ManagedBy, wellknown.ManagedByValue), "", native,
			Role{Kind: Backup, Allowed: true, Keep: Values}},
		{"backup outside --source-namespaces", obj("team-b", wellknown.BackupOf, "db", "label:"+wellknown.Backup, "true"), "", native,
			Role{Kind: Backup}},
		{"the digest key", obj("courier", "label:"+wellknown.DigestKey, "true"), "", native,
			Role{Kind: DigestKey, Keep: Values}},
		{"a digest-key label elsewhere", obj("platform", "label:"+wellknown.DigestKey, "true"), "", native,
			Role{Allowed: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Of(tt.m, tt.typ, tt.cfg)); diff != "" {
				t.Errorf("Of (-want +got):\n%s", diff)
			}
			// The cache drops the labels and annotations of an object that
			// is not Marked: its role must not depend on them.
			if !Marked(tt.m) {
				stripped := tt.m.DeepCopy()
				stripped.Labels, stripped.Annotations = nil, nil
				if diff := cmp.Diff(tt.want, Of(stripped, tt.typ, tt.cfg)); diff != "" {
					t.Errorf("not Marked, but its role depends on its labels or annotations (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestMarked(t *testing.T) {
	for _, tt := range []struct {
		labels, annotations map[string]string
		want                bool
	}{
		{nil, nil, false},
		{map[string]string{"app": "web", "team": "a"}, map[string]string{"kubernetes.io/description": "x", "helm.sh/chart": "c"}, false},
		{map[string]string{wellknown.ManagedBy: "Helm"}, nil, false},
		{map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue}, nil, true},
		{nil, map[string]string{wellknown.ReplicateTo: ""}, true},
		{map[string]string{wellknown.Protect: "true"}, nil, true},
		{nil, map[string]string{"cache.courier.dev/values": "sha256"}, true},
		{nil, map[string]string{"notcourier.dev/x": "1"}, false},
		{nil, map[string]string{source.MittwaldReplicateFrom: "a/b"}, true},
		{nil, map[string]string{source.ReflectorReflects: "a/b"}, true},
		{nil, map[string]string{"reloader.stakater.com/match": "true"}, true},
		{nil, map[string]string{"secret.reloader.stakater.com/reload": "db"}, true},
		{nil, map[string]string{"reloader.stakater.com": "no slash"}, false},
	} {
		m := &metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations}
		if got := Marked(m); got != tt.want {
			t.Errorf("Marked(labels %v, annotations %v) = %t, want %t", tt.labels, tt.annotations, got, tt.want)
		}
	}
}
