package informers

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func consuming(namespace, name string, secrets ...string) *appsv1.Deployment {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}}
	for _, s := range secrets {
		d.Spec.Template.Spec.Volumes = append(d.Spec.Template.Spec.Volumes,
			corev1.Volume{Name: s, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: s}}})
	}
	return d
}

// collidingName is a Secret name, other than name, whose input in namespace
// ns shares the bucket of Secret name in namespace ns.
func collidingName(t *testing.T, ns, name string) string {
	want := bucketOf("Secret", ns, name)
	for i := range 1 << 20 {
		if other := fmt.Sprintf("other-%d", i); bucketOf("Secret", ns, other) == want {
			return other
		}
	}
	t.Fatal("no colliding name")
	return ""
}

// Consumers are exactly the workloads consuming the input, whatever else
// shares its bucket, and follow a workload's inputs as they change.
func TestConsumersAreThoseOfTheInputNotOfItsBucket(t *testing.T) {
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{ConsumersByInput: indexConsumersByInput})
	other := collidingName(t, "a", "token")
	for _, d := range []*appsv1.Deployment{
		consuming("a", "web", "token", other), // one bucket value for both
		consuming("a", "api", other),
		consuming("a", "db", "token"),
		consuming("b", "web", "token"), // the same name elsewhere
		consuming("a", "idle"),
	} {
		if err := store.Add(d); err != nil {
			t.Fatal(err)
		}
	}
	names := func(ik string) []string {
		objs, err := Consumers(store, ik)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range objs {
			d := o.(*appsv1.Deployment)
			out = append(out, d.Namespace+"/"+d.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		input string
		want  []string
	}{
		{InputKey("Secret", "a", "token"), []string{"a/db", "a/web"}},
		{InputKey("Secret", "a", other), []string{"a/api", "a/web"}},
		{InputKey("Secret", "b", "token"), []string{"b/web"}},
		{InputKey("ConfigMap", "a", "token"), nil},
		{InputKey("Secret", "c", "token"), nil},
	} {
		if diff := cmp.Diff(c.want, names(c.input)); diff != "" {
			t.Errorf("consumers of %s (-want +got):\n%s", c.input, diff)
		}
	}
	if err := store.Update(consuming("a", "db", other)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a/web"}, names(InputKey("Secret", "a", "token"))); diff != "" {
		t.Errorf("after db stopped consuming token (-want +got):\n%s", diff)
	}
	if err := store.Delete(consuming("a", "web")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"a/api", "a/db"}, names(InputKey("Secret", "a", other))); diff != "" {
		t.Errorf("after web went (-want +got):\n%s", diff)
	}
}
