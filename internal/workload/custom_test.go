package workload

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func TestParseResources(t *testing.T) {
	var rs Resources
	if err := rs.Set("rollouts.argoproj.io, harborclusters.goharbor.io:spec.template.metadata.annotations"); err != nil {
		t.Fatal(err)
	}
	if err := rs.Set("widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	if got, want := rs.String(), "rollouts.argoproj.io,harborclusters.goharbor.io:spec.template.metadata.annotations,widgets.example.com"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if !rs[0].HasTemplate() || rs[1].HasTemplate() {
		t.Error("only Rollouts have a pod template courier reads")
	}
	if diff := cmp.Diff([]string{"spec", "template", "metadata", "annotations"}, rs[0].Path); diff != "" {
		t.Errorf("Rollouts' hash path (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"metadata", "annotations"}, rs[2].Path); diff != "" {
		t.Errorf("default hash path (-want +got):\n%s", diff)
	}
	for in, want := range map[string]string{
		"rollouts":                                "is not <plural>.<group>",
		"Widgets.example.com":                     "is not <plural>.<group>",
		"rollouts.argoproj.io:spec.x":             "takes no field path",
		"widgets.example.com:spec..x":             "empty part",
		"widgets.example.com,widgets.example.com": "listed twice",
	} {
		var rs Resources
		if err := rs.Set(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Set(%q) = %v, want an error saying %q", in, err, want)
		}
	}
}

func TestObjectOfReadsWhatTheReloaderNeeds(t *testing.T) {
	var rs Resources
	if err := rs.Set("rollouts.argoproj.io,widgets.example.com:spec.pod.annotations"); err != nil {
		t.Fatal(err)
	}
	rollout := Custom{Resource: rs[0], Version: "v1alpha1", Kind: "Rollout"}
	if rollout.Name() != Rollout {
		t.Errorf("Rollouts are named %q, want %q", rollout.Name(), Rollout)
	}
	widget := Custom{Resource: rs[1], Version: "v1", Kind: "Widget"}

	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "r", "namespace": "n", "annotations": map[string]any{
			"courier.dev/reload": "true", "kubectl.kubernetes.io/last-applied-configuration": "{…}"}},
		"spec": map[string]any{"template": map[string]any{
			"metadata": map[string]any{"annotations": map[string]any{wellknown.ConfigHash: "h1"}},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "x",
				"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "db"}}}}}}}},
	}}
	o, err := ObjectOf(rollout, u)
	if err != nil {
		t.Fatal(err)
	}
	if kind := KindOf(o); kind != Rollout {
		t.Errorf("KindOf(a Rollout) names it %q, want %q", kind, Rollout)
	}
	if o.APIVersion != "argoproj.io/v1alpha1" || o.Kind != "Rollout" || o.Hash != "h1" || o.GetAnnotations()["kubectl.kubernetes.io/last-applied-configuration"] != "" {
		t.Errorf("ObjectOf(Rollout) = %+v", o)
	}
	if diff := cmp.Diff([]inputs.Ref{{Kind: wellknown.KindSecret, Name: "db"}}, Inputs(o)); diff != "" {
		t.Errorf("a Rollout's inputs (-want +got):\n%s", diff)
	}

	u.Object["spec"] = map[string]any{"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}
	if o, err = ObjectOf(rollout, u); err != nil || o.WorkloadRef != "web" || o.Refs != nil || Inputs(o) != nil || RefOf(o) != "web" {
		t.Errorf("ObjectOf(Rollout with workloadRef) = %+v, %v", o, err)
	}
	// What courier cannot read: an error, and an object with no inputs (so
	// the reloader never writes a template into it).
	u.Object["spec"] = map[string]any{"workloadRef": map[string]any{"kind": "ReplicaSet", "name": "web"}}
	if o, err = ObjectOf(rollout, u); err == nil || !strings.Contains(err.Error(), "names a ReplicaSet") || o == nil || Inputs(o) != nil || RefOf(o) != "" {
		t.Errorf("a workloadRef to a ReplicaSet: %+v, %v; want an object with no inputs and an error naming it", o, err)
	}
	u.Object["metadata"].(map[string]any)["annotations"] = map[string]any{wellknown.ReloadOn: "secret/a"}
	u.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{"volumes": "not a list"}}}
	if o, err = ObjectOf(rollout, u); err == nil || o == nil || o.Refs != nil || Inputs(o) != nil {
		t.Errorf("a Rollout with a malformed template: %+v, %v; want an object with no inputs (reload-on is not a Rollout's input) and an error", o, err)
	}

	u.Object["metadata"].(map[string]any)["annotations"] = map[string]any{wellknown.ReloadOn: "secret/a, configmap/b, bogus"}
	u.Object["spec"] = map[string]any{"pod": map[string]any{"annotations": map[string]any{wellknown.ConfigHash: "h2"}}}
	if o, err = ObjectOf(widget, u); err != nil || o.Hash != "h2" {
		t.Fatalf("ObjectOf(Widget) = %+v, %v", o, err)
	}
	want := []inputs.Ref{{Kind: wellknown.KindConfigMap, Name: "b"}, {Kind: wellknown.KindSecret, Name: "a"}}
	if diff := cmp.Diff(want, Inputs(o)); diff != "" {
		t.Errorf("a custom resource's inputs are its reload-on (-want +got):\n%s", diff)
	}
	c := o.DeepCopyObject().(*Object)
	c.SetAnnotations(map[string]string{"x": "y"})
	if _, ok := o.GetAnnotations()["x"]; ok || c.GetAnnotations()["x"] != "y" {
		t.Error("DeepCopyObject shares the annotations")
	}
}

func TestFieldPathsCourierMayNotWrite(t *testing.T) {
	for _, in := range []string{"widgets.example.com:metadata.labels", "widgets.example.com:status.annotations", "widgets.example.com:kind"} {
		var rs Resources
		if err := rs.Set(in); err == nil || !strings.Contains(err.Error(), "is not a map courier may write") {
			t.Errorf("Set(%q) = %v, want it refused", in, err)
		}
	}
	var rs Resources
	if err := rs.Set("widgets.example.com:spec.containers.annotations"); err != nil {
		t.Fatal(err)
	}
	widget := Custom{Resource: rs[0], Version: "v1", Kind: "Widget"}
	u := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "w", "namespace": "n", "annotations": map[string]any{wellknown.ReloadOn: "secret/a"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c"}}},
	}}
	o, err := ObjectOf(widget, u)
	if err == nil || !strings.Contains(err.Error(), "spec.containers is not a map") || !o.Unreadable || Inputs(o) != nil {
		t.Errorf("a path through a list: %+v, %v; want an unreadable object without inputs", o, err)
	}
	u.Object["spec"] = map[string]any{"containers": map[string]any{"annotations": map[string]any{wellknown.ConfigHash: "h"}}}
	if o, err = ObjectOf(widget, u); err != nil || o.Hash != "h" || len(Inputs(o)) != 1 {
		t.Errorf("a path through maps: %+v, %v", o, err)
	}
}

// TemplateSum changes with the owner's edits of the pod template, never with
// courier's config-hash.
func TestTemplateSum(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"team": "a"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}}}
	sum := func(d *appsv1.Deployment) uint64 {
		o, ok := Cached(d)
		if !ok {
			t.Fatal("not a workload")
		}
		return o.TemplateSum
	}
	base := sum(d)
	hashed := d.DeepCopy()
	hashed.Spec.Template.Annotations[wellknown.ConfigHash] = "abc"
	scaled := d.DeepCopy()
	scaled.Spec.Replicas = new(int32)
	if base == 0 || sum(hashed) != base || sum(scaled) != base {
		t.Errorf("courier's config-hash or a scale changed the sum: %x, %x, %x", base, sum(hashed), sum(scaled))
	}
	image := d.DeepCopy()
	image.Spec.Template.Spec.Containers[0].Image = "app:2"
	restarted := d.DeepCopy()
	restarted.Spec.Template.Annotations["kubectl.kubernetes.io/restartedAt"] = "now"
	if sum(image) == base || sum(restarted) == base {
		t.Errorf("the owner's edits left the sum as it was")
	}
}
