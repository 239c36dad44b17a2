package replicator

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Kinds the replicator handles; the first field of every queue key.
const (
	kindSecret    = wellknown.KindSecret
	kindConfigMap = wellknown.KindConfigMap
)

// item is the replicator's read-only view of a cached Secret or ConfigMap.
type item struct {
	obj       runtime.Object // the cached object; never modified
	meta      metav1.Object
	typ       corev1.SecretType // "" for ConfigMaps
	immutable bool
	// entries computes the per-key digests; for a source that means hashing
	// every value, so callers go through Controller.hash, which caches it.
	entries func() []content.Entry
	// facts, for a source: gathered once (Controller.factsOf).
	facts *facts
}

func (i *item) ref() string { return i.meta.GetNamespace() + "/" + i.meta.GetName() }

// has reports whether the object holds key.
func (i *item) has(key string) bool { return content.Has(i.obj, key) }

// itemOf is the item of a cached Secret or ConfigMap, full or digested.
func itemOf(obj any) *item {
	_, typ, immutable, _ := content.Fields(obj)
	return &item{obj: obj.(runtime.Object), meta: obj.(metav1.Object), typ: typ, immutable: isTrue(immutable),
		entries: func() []content.Entry { return content.Entries(obj) }}
}

// withContent is it as the replicator reads it: a source's (in an allowed
// namespace) with its values, a pull's with its digests. The cache may hold
// their metadata only (informers.Contents: everything courier does not
// manage is listed and watched as metadata); they are then read, once per
// resourceVersion. A read that fails, or finds it gone or replaced, is an
// error: the key is retried, never acted on as if the object were not there.
func (c *Controller) withContent(ctx context.Context, kind string, it *item) (*item, error) {
	if it == nil {
		return nil, nil
	}
	if r := role.Of(it.meta, "", c.roles); r.Keep != role.Values && r.Kind != role.PullTarget {
		return it, nil
	}
	return c.contentOf(ctx, kind, it)
}

// contentOf is it with its content (its values if it is a source, else its
// digests), read if the cache holds its metadata only.
func (c *Controller) contentOf(ctx context.Context, kind string, it *item) (*item, error) {
	if it == nil || c.opts.Contents == nil || content.Read(it.obj) {
		return it, nil
	}
	obj, err := c.opts.Contents.Of(ctx, kind, it.meta)
	if err != nil {
		return nil, err
	}
	return itemOf(obj), nil
}

// objects is one kind as the replicator sees it: cache reads through the
// informer's indexer, and what it writes.
type objects struct {
	kind    string
	indexer cache.Indexer
	// replica builds the replica of src holding the keys spec says, with
	// metadata m.
	replica func(src *item, spec source.Spec, m metav1.ObjectMeta) runtime.Object
}

// get returns the cached object, or nil when there is none.
func (o *objects) get(namespace, name string) (*item, error) {
	obj, ok, err := o.indexer.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, err
	}
	return itemOf(obj), nil
}

func (o *objects) byIndex(index, value string) ([]*item, error) {
	objs, err := o.indexer.ByIndex(index, value)
	if err != nil {
		return nil, err
	}
	out := make([]*item, 0, len(objs))
	for _, obj := range objs {
		out = append(out, itemOf(obj))
	}
	return out, nil
}

func newSecrets(indexer cache.Indexer) *objects {
	return &objects{
		kind:    kindSecret,
		indexer: indexer,
		replica: func(src *item, spec source.Spec, m metav1.ObjectMeta) runtime.Object {
			s := src.obj.(*corev1.Secret)
			return &corev1.Secret{ObjectMeta: m, Type: spec.Type(s.Type), Data: spec.SecretData(s.Data), Immutable: s.Immutable}
		},
	}
}

func newConfigMaps(indexer cache.Indexer) *objects {
	return &objects{
		kind:    kindConfigMap,
		indexer: indexer,
		replica: func(src *item, spec source.Spec, m metav1.ObjectMeta) runtime.Object {
			cm := src.obj.(*corev1.ConfigMap)
			return &corev1.ConfigMap{ObjectMeta: m, Data: spec.ConfigMapData(cm.Data), BinaryData: spec.SecretData(cm.BinaryData), Immutable: cm.Immutable}
		},
	}
}

func isTrue(b *bool) bool { return b != nil && *b }

// replicaMeta is a replica's metadata: what is not courier's is kept from
// existing (nil for a new replica); courier's own keys and the metadata
// copied from the source are set. sourceCluster and targetCluster name the
// cluster the source is in and the one the replica is written into, for a
// replica in another cluster ("" in the source's own).
func replicaMeta(src metav1.Object, namespace, installation, sourceCluster, targetCluster string, want replica.Want, existing metav1.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: src.GetName(), Namespace: namespace}
	labels := map[string]string{}
	annotations := map[string]string{}
	if existing != nil {
		m.ResourceVersion = existing.GetResourceVersion()
		m.UID = existing.GetUID()
		// An update writes the whole object: what others added to the
		// replica's metadata stays (a finalizer, an owner for the garbage
		// collector), as its labels and annotations do.
		m.OwnerReferences = existing.GetOwnerReferences()
		m.Finalizers = existing.GetFinalizers()
		maps.Copy(labels, existing.GetLabels())
		maps.Copy(annotations, existing.GetAnnotations())
	}
	source.Apply(labels, annotations, source.RecordOf(annotations), want.Copied)
	delete(annotations, wellknown.Via)
	if want.Via != "" {
		annotations[wellknown.Via] = want.Via
	}
	labels[wellknown.ManagedBy] = wellknown.ManagedByValue
	labels[wellknown.Replica] = "true"
	annotations[wellknown.Source] = src.GetNamespace() + "/" + src.GetName()
	annotations[wellknown.ContentHash] = replica.Stamp(want.Hash, want.Via, want.Copied)
	annotations[wellknown.Installation] = installation
	delete(annotations, wellknown.SourceCluster)
	delete(annotations, wellknown.TargetCluster)
	if sourceCluster != "" {
		annotations[wellknown.SourceCluster] = sourceCluster
		annotations[wellknown.TargetCluster] = targetCluster
	}
	m.Labels, m.Annotations = labels, annotations
	return m
}
