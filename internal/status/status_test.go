package status

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func ns(name string, labels map[string]string) corev1.Namespace {
	return corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func secret(namespace, name string, annotations map[string]string) Object {
	return Object{Kind: wellknown.KindSecret, Meta: &metav1.ObjectMeta{Namespace: namespace, Name: name, Annotations: annotations}}
}

func TestBuildCountsTargetsByState(t *testing.T) {
	prod := map[string]string{"env": "prod"}
	src := secret("platform", "db", map[string]string{wellknown.ReplicateTo: "env=prod"})
	src.Hash = "h2"
	replica := func(namespace, hash string) Object {
		o := secret(namespace, "db", map[string]string{wellknown.Source: "platform/db", wellknown.ContentHash: hash})
		o.Meta.SetLabels(map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, wellknown.Replica: "true"})
		return o
	}
	deploy := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web",
		Annotations: map[string]string{wellknown.ReloadedAt: "2026-11-22T07:00:00Z", wellknown.ReloadedFor: "secret/db"}}}
	deploy.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "db"}}}}
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web"}}
	other.Spec.Template.Spec.Volumes = deploy.Spec.Template.Spec.Volumes // consumes a db courier does not own

	c := Cluster{
		Namespaces: []corev1.Namespace{
			ns("platform", prod), // the source's own: never a target
			ns("a", prod), ns("b", prod), ns("c", prod), ns("d", prod), ns("dev", nil),
			ns("kube-system", prod), ns("optout", map[string]string{"env": "prod", wellknown.Replication: "disabled"}),
		},
		Objects: []Object{
			src,
			replica("a", "h2"),       // in sync
			replica("b", "h1"),       // stale: error
			secret("c", "db", nil),   // not courier's: conflict
			secret("dev", "db", nil), // not targeted
			secret("other", "cfg", map[string]string{wellknown.ReplicateTo: "(("}), // invalid, and not allowed
		},
		Workloads: []Workload{WorkloadOf(deploy), WorkloadOf(other)},
	}
	r := Build(c, Options{SourceNamespaces: globs.List{"platform"}})
	want := Report{Sources: []Source{
		{Kind: "Secret", Namespace: "other", Name: "cfg", Selector: "((", Problem: "namespace not in --source-namespaces; ignored", Consumers: []Consumer{}},
		{Kind: "Secret", Namespace: "platform", Name: "db", Selector: "env=prod", Targets: 4, InSync: 1, Conflict: 1, Error: 2,
			Consumers: []Consumer{{Kind: "Deployment", Namespace: "a", Name: "web", Input: "a/db", ReloadedAt: "2026-11-22T07:00:00Z", ReloadedFor: "secret/db"}}},
	}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}

	r = Build(c, Options{SourceNamespaces: globs.List{"*"}})
	if got := r.Sources[0].Problem; got == "" {
		t.Errorf("an invalid selector is not reported")
	}
}

// TestInProgress: the changes still rolling out, per source, wave and
// state, from the consumers' verdicts; the rest are left out.
func TestInProgress(t *testing.T) {
	v := func(verdict string, wave int) *Verdict { return &Verdict{Verdict: verdict, Wave: wave} }
	sources := []Source{{Kind: "Secret", Namespace: "src", Name: "ca", Consumers: []Consumer{
		{Kind: "Deployment", Namespace: "b", Name: "api", Verdict: v("halted", 1)},
		{Kind: "Deployment", Namespace: "a", Name: "web", Verdict: v("up to date", 0)},
		{Kind: "Deployment", Namespace: "c", Name: "cart", Verdict: v("halted", 1)},
		{Kind: "Deployment", Namespace: "c", Name: "edge", Verdict: v("waits for an earlier wave", 2)},
		{Kind: "Deployment", Namespace: "d", Name: "old", Verdict: v("rolls out", -1)},
		{Kind: "Deployment", Namespace: "d", Name: "x"},
	}}}
	want := []Change{
		{Source: "Secret src/ca", Wave: 0, State: "rolls out", Workloads: []string{"Deployment d/old"}},
		{Source: "Secret src/ca", Wave: 1, State: "halted", Workloads: []string{"Deployment b/api", "Deployment c/cart"}},
		{Source: "Secret src/ca", Wave: 2, State: "waits for an earlier wave", Workloads: []string{"Deployment c/edge"}},
	}
	if diff := cmp.Diff(want, inProgress(sources)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
