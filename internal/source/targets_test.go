package source

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func ns(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// TestTargetsReadTheOtherToolsAnnotationsAsTheyDo follows
// docs/research/incumbent-annotations.md §2.1 and §3.2.
func TestTargetsReadTheOtherToolsAnnotationsAsTheyDo(t *testing.T) {
	all := Compat{Replicator: true, Reflector: true}
	for _, tt := range []struct {
		name        string
		annotations map[string]string
		compat      Compat
		via         string
		match, miss []*corev1.Namespace
	}{
		{"replicate-to: names and anchored patterns (README)",
			map[string]string{MittwaldReplicateTo: "my-ns-1,namespace-[0-9]*"}, all, MittwaldReplicateTo,
			[]*corev1.Namespace{ns("my-ns-1", nil), ns("namespace-12", nil), ns("namespace-", nil)},
			[]*corev1.Namespace{ns("my-ns-10", nil), ns("x-namespace-1", nil)}},
		{"replicate-to: anchors already there",
			map[string]string{MittwaldReplicateTo: "^team-.*$"}, all, MittwaldReplicateTo,
			[]*corev1.Namespace{ns("team-a", nil)}, []*corev1.Namespace{ns("ateam-a", nil)}},
		{"replicate-to-matching: a folded selector (README), with a trailing newline",
			map[string]string{MittwaldReplicateToMatching: "my-label=value,my-other-label,my-other-label notin (foo,bar)\n"}, all, MittwaldReplicateToMatching,
			[]*corev1.Namespace{ns("a", map[string]string{"my-label": "value", "my-other-label": "x"})},
			[]*corev1.Namespace{ns("b", map[string]string{"my-label": "value", "my-other-label": "foo"}), ns("c", nil)}},
		{"both: their union",
			map[string]string{MittwaldReplicateTo: "by-name", MittwaldReplicateToMatching: "env=prod"}, all, MittwaldReplicateTo + ", " + MittwaldReplicateToMatching,
			[]*corev1.Namespace{ns("by-name", nil), ns("x", map[string]string{"env": "prod"})}, []*corev1.Namespace{ns("y", nil)}},
		{"reflector: allowed and auto, lists missing: every namespace",
			map[string]string{ReflectorAllowed: "true", ReflectorAutoEnabled: "True"}, all, ReflectorAutoEnabled,
			[]*corev1.Namespace{ns("anything", nil)}, nil},
		{"reflector: allowed list and auto list both apply, whole names only",
			map[string]string{ReflectorAllowed: "true", ReflectorAutoEnabled: "true",
				ReflectorAllowedNamespaces: "namespace-1,namespace-2,namespace-[0-9]*", ReflectorAutoNamespaces: "namespace-[12]"}, all, ReflectorAutoEnabled,
			[]*corev1.Namespace{ns("namespace-1", nil), ns("namespace-2", nil)},
			[]*corev1.Namespace{ns("namespace-3", nil), ns("namespace-12", nil), ns("other", nil)}},
		{"reflector: a list of only commas allows nothing",
			map[string]string{ReflectorAllowed: "true", ReflectorAutoEnabled: "true", ReflectorAllowedNamespaces: " , "}, all, ReflectorAutoEnabled,
			nil, []*corev1.Namespace{ns("a", nil)}},
		{"reflector: an auto selector alone selects by label, not every namespace",
			map[string]string{ReflectorAllowed: "true", ReflectorAutoEnabled: "true", ReflectorAutoSelector: "env=prod"}, all, ReflectorAutoEnabled,
			[]*corev1.Namespace{ns("p", map[string]string{"env": "prod"})}, []*corev1.Namespace{ns("d", map[string]string{"env": "dev"}), ns("x", nil)}},
		{"reflector: the list or the selector, within what is allowed",
			map[string]string{ReflectorAllowed: "true", ReflectorAutoEnabled: "true", ReflectorAutoNamespaces: "named",
				ReflectorAutoSelector: "env=prod", ReflectorAllowedSelector: "tier!=secret"}, all, ReflectorAutoEnabled,
			[]*corev1.Namespace{ns("named", nil), ns("p", map[string]string{"env": "prod"})},
			[]*corev1.Namespace{ns("other", nil), ns("s", map[string]string{"env": "prod", "tier": "secret"})}},
		{"courier's own key wins",
			map[string]string{wellknown.ReplicateTo: "env=prod", MittwaldReplicateTo: "other"}, all, wellknown.ReplicateTo,
			[]*corev1.Namespace{ns("x", map[string]string{"env": "prod"})}, []*corev1.Namespace{ns("other", nil)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !IsSource(tt.annotations, tt.compat) {
				t.Fatal("not a source")
			}
			targets, err := TargetsOf(tt.annotations, tt.compat)
			if err != nil {
				t.Fatal(err)
			}
			if targets.Via != tt.via {
				t.Errorf("via %q, want %q", targets.Via, tt.via)
			}
			for _, n := range tt.match {
				if !targets.Matches(namespaces.From(n)) {
					t.Errorf("%s (%v) does not match", n.Name, n.Labels)
				}
			}
			for _, n := range tt.miss {
				if targets.Matches(namespaces.From(n)) {
					t.Errorf("%s (%v) matches", n.Name, n.Labels)
				}
			}
		})
	}
}

func TestOtherToolsAnnotationsNeedCompat(t *testing.T) {
	for _, a := range []map[string]string{
		{MittwaldReplicateTo: "x"}, {MittwaldReplicateToMatching: "a=b"},
		{ReflectorAllowed: "true", ReflectorAutoEnabled: "true"},
	} {
		if IsSource(a, Compat{Reloader: true}) {
			t.Errorf("%v is a source without --compat", a)
		}
	}
	if IsSource(map[string]string{ReflectorAllowed: "true"}, Compat{Reflector: true}) {
		t.Error("reflection-allowed without auto-enabled only allows mirrors; it pushes nothing")
	}
	for _, a := range []map[string]string{
		{MittwaldReplicateTo: "ok, bad[", MittwaldReplicateToMatching: "a=b"},
		{MittwaldReplicateToMatching: "a in (b"},
		{ReflectorAllowed: "true", ReflectorAutoEnabled: "true", ReflectorAutoNamespaces: "("},
	} {
		if _, err := TargetsOf(a, Compat{Replicator: true, Reflector: true}); err == nil {
			t.Errorf("%v: no error", a)
		}
	}
}
