package reloader

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
)

func providerReport(name, rv, class string, objects ...map[string]any) *unstructured.Unstructured {
	objs := make([]any, len(objects))
	for i, o := range objects {
		objs[i] = o
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
		"metadata": map[string]any{"name": name, "namespace": "ns", "resourceVersion": rv},
		"status":   map[string]any{"secretProviderClassName": class, "objects": objs},
	}}
	return u
}

// A class's content moves only forward, and only on a rotation: the
// newest report at start; then a report rewritten with other objects. The
// other pods' reports of the same versions, a new pod's report (whatever
// it holds), and the newest report removed leaving older ones behind
// change nothing. Object order within a report does not matter;
// resourceVersions compare as numbers.
func TestClassContentMovesOnlyOnRotation(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.c
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{informers.ByProviderClass: func(obj any) ([]string, error) {
		ns, class, _ := informers.ProviderClassOf(obj)
		return []string{ns + "/" + class}, nil
	}})
	synced := false
	c.providerStatuses, c.providersSynced = idx, func() bool { return synced }
	h := c.providerHandler()
	v := func(id, version string) map[string]any { return map[string]any{"id": id, "version": version} }
	add := func(u *unstructured.Unstructured, initial bool) {
		if err := idx.Add(u); err != nil {
			t.Fatal(err)
		}
		h.OnAdd(u, initial)
	}
	update := func(old, u *unstructured.Unstructured) {
		if err := idx.Update(u); err != nil {
			t.Fatal(err)
		}
		h.OnUpdate(old, u)
	}
	holds := func(want string, objs ...map[string]any) {
		t.Helper()
		got, ok := c.object("SecretProviderClass", "ns", "db").(*unstructured.Unstructured)
		if !ok {
			t.Fatalf("the class has no content; want %s", want)
		}
		if content.Hash(reportEntries(got)) != content.Hash(reportEntries(providerReport("x", "1", "db", objs...))) {
			t.Errorf("the class holds %v; want %s", got.Object["status"], want)
		}
	}

	a := providerReport("a", "9", "db", v("user", "1"), v("password", "1"))
	b := providerReport("b", "10", "db", v("password", "2"), v("user", "1")) // newer than 9, not as strings
	add(a, true)
	add(b, true)
	add(providerReport("c", "11", "other", v("x", "7")), true)
	if c.object("SecretProviderClass", "ns", "db") != nil {
		t.Error("the class has content before every report is known")
	}
	synced = true
	holds("the newest report's at start", v("user", "1"), v("password", "2"))

	// a is rotated to what b holds: no move. Then b to a third version.
	a2 := providerReport("a", "12", "db", v("user", "1"), v("password", "2"))
	update(a, a2)
	holds("unchanged", v("user", "1"), v("password", "2"))
	b2 := providerReport("b", "13", "db", v("user", "1"), v("password", "3"))
	update(b, b2)
	holds("the rotation's", v("user", "1"), v("password", "3"))

	// b2 goes with its pod, a2 (older versions) stays: no move back.
	if err := idx.Delete(b2); err != nil {
		t.Fatal(err)
	}
	h.OnDelete(b2)
	holds("still the rotation's", v("user", "1"), v("password", "3"))
	// A new pod's report, whatever it holds: no move.
	add(providerReport("d", "14", "db", v("user", "1"), v("password", "4")), false)
	holds("still the rotation's", v("user", "1"), v("password", "3"))
	// An update that is not newer than what set the content: no move.
	update(providerReport("a", "12", "db", v("user", "1"), v("password", "2")), providerReport("a", "12", "db", v("user", "0"), v("password", "0")))
	holds("still the rotation's", v("user", "1"), v("password", "3"))

	if c.newestReport("ns", "none") != nil || c.object("SecretProviderClass", "ns", "none") != nil {
		t.Error("a class without reports has content")
	}
}
