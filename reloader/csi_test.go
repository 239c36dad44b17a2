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

// A class holds what its newest report says: the order of the objects in
// a report does not matter, only their ids and versions; resourceVersions
// compare as numbers.
func TestProviderReports(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{informers.ByProviderClass: func(obj any) ([]string, error) {
		ns, class, _ := informers.ProviderClassOf(obj)
		return []string{ns + "/" + class}, nil
	}})
	c := &Controller{providerStatuses: idx}
	v := func(id, version string) map[string]any { return map[string]any{"id": id, "version": version} }
	for _, o := range []*unstructured.Unstructured{
		providerReport("a", "9", "db", v("user", "1"), v("password", "1")),
		providerReport("b", "10", "db", v("password", "2"), v("user", "1")), // newer than 9, not as strings
		providerReport("c", "11", "other", v("x", "7")),
	} {
		if err := idx.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	newest := c.newestReport("ns", "db")
	if newest == nil || newest.GetName() != "b" {
		t.Fatalf("newest report of db: %v, want b", newest)
	}
	same := reportEntries(providerReport("x", "1", "db", v("user", "1"), v("password", "2")))
	if content.Hash(reportEntries(newest)) != content.Hash(same) {
		t.Error("the same ids and versions in another order give another content")
	}
	if o, ok := c.object("SecretProviderClass", "ns", "db").(*unstructured.Unstructured); !ok || o.GetName() != "b" {
		t.Errorf("object does not return the newest report: %v", o)
	}
	if content.Hash(same) == content.Hash(reportEntries(providerReport("a", "9", "db", v("user", "1"), v("password", "1")))) {
		t.Error("a new version of one object does not change the content")
	}
	if c.newestReport("ns", "none") != nil || c.object("SecretProviderClass", "ns", "none") != nil {
		t.Error("a class without reports has content")
	}
}
