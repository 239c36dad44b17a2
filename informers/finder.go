package informers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Finder reads a Secret or ConfigMap by name whatever
// --resource-label-selector says (view.Finder): a list in its namespace
// with the field selector metadata.name, which the list permission of
// courier's Role allows (no get), asking for metadata only, and keeping
// none of its annotations, so no value ever reaches courier. It is how
// courier tells an object that left its selector (the API server sends
// DELETED for both) from one deleted. Answers are never reused: a stale
// "gone" could delete replicas of a source that is back. The API server
// reads one key for a list by metadata.name, so asking once per replica of
// a deleted source costs about as much as a GET each.
type Finder struct {
	client metadata.Interface
}

var _ view.Finder = Finder{}

// NewFinder reads through client.
func NewFinder(client metadata.Interface) Finder { return Finder{client: client} }

var resources = map[string]schema.GroupVersionResource{
	wellknown.KindSecret:    {Version: "v1", Resource: "secrets"},
	wellknown.KindConfigMap: {Version: "v1", Resource: "configmaps"},
}

// Find returns the metadata of kind namespace/name, or nil when there is
// none. A Helm release Secret counts as none: courier never watches them.
func (f Finder) Find(ctx context.Context, kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	gvr, ok := resources[kind]
	if !ok {
		return nil, fmt.Errorf("courier finds Secrets and ConfigMaps only, not %s", kind)
	}
	l, err := f.client.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{FieldSelector: byName(kind, name)})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if m := &l.Items[i]; m.Name == name {
			// Only what tells gone from hidden is kept: annotations may
			// hold values (kubectl's last-applied configuration of a Secret
			// applied with kubectl), and nothing here needs them.
			m.Annotations, m.ManagedFields = nil, nil
			return m, nil
		}
	}
	return nil, nil
}

// ExistedAt reports whether the object uid, resource gvr namespace/name,
// was there at resourceVersion version: one list by name at that exact
// version (etcd keeps it until compacted; then the API server answers 410
// Gone, an error), asking for metadata only.
func (f Finder) ExistedAt(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, uid types.UID, version string) (bool, error) {
	l, err := f.client.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
		ResourceVersion: version, ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	})
	if err != nil {
		return false, err
	}
	for _, m := range l.Items {
		if m.Name == name && m.UID == uid {
			return true, nil
		}
	}
	return false, nil
}

// byName is the field selector of a list of kind's object name: one key for
// the API server, and never a Helm release Secret (courier watches none).
func byName(kind, name string) string {
	selector := fields.OneTermEqualSelector("metadata.name", name).String()
	if kind == wellknown.KindSecret {
		selector += "," + SecretFieldSelector
	}
	return selector
}
