package replicator

import (
	"context"
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/content"
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

// metaOf is a copy of the cached object's metadata, and its immutable field.
func metaOf(obj runtime.Object) (metav1.ObjectMeta, *bool) {
	m, _, immutable, ok := content.Fields(obj)
	if !ok {
		return metav1.ObjectMeta{}, nil
	}
	if immutable != nil {
		v := *immutable
		immutable = &v
	}
	return *m.DeepCopy(), immutable
}

// objects is one kind as the replicator sees it: cache reads through the
// informer's indexer, and the writes.
type objects struct {
	kind    string
	indexer cache.Indexer
	// replica builds the replica of src holding the keys spec says, with
	// metadata m.
	replica func(src *item, spec source.Spec, m metav1.ObjectMeta) runtime.Object
	// pulled builds what an object pulling from src becomes (see syncPull).
	pulled func(t, src *item, spec source.Spec, ours map[string]string) runtime.Object
	create func(ctx context.Context, obj runtime.Object) error
	update func(ctx context.Context, obj runtime.Object) error
	delete func(ctx context.Context, namespace, name string, opts metav1.DeleteOptions) error
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

var (
	createOpts = metav1.CreateOptions{FieldManager: wellknown.FieldManager}
	updateOpts = metav1.UpdateOptions{FieldManager: wellknown.FieldManager}
)

func newSecrets(client kubernetes.Interface, indexer cache.Indexer) *objects {
	api := func(ns string) secretAPI { return client.CoreV1().Secrets(ns) }
	return &objects{
		kind:    kindSecret,
		indexer: indexer,
		pulled:  pulledSecret,
		replica: func(src *item, spec source.Spec, m metav1.ObjectMeta) runtime.Object {
			s := src.obj.(*corev1.Secret)
			return &corev1.Secret{ObjectMeta: m, Type: s.Type, Data: spec.SecretData(s.Data), Immutable: s.Immutable}
		},
		create: func(ctx context.Context, obj runtime.Object) error {
			s := obj.(*corev1.Secret)
			_, err := api(s.Namespace).Create(ctx, s, createOpts)
			return err
		},
		update: func(ctx context.Context, obj runtime.Object) error {
			s := obj.(*corev1.Secret)
			_, err := api(s.Namespace).Update(ctx, s, updateOpts)
			return err
		},
		delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
			return api(ns).Delete(ctx, name, opts)
		},
	}
}

type secretAPI interface {
	Create(context.Context, *corev1.Secret, metav1.CreateOptions) (*corev1.Secret, error)
	Update(context.Context, *corev1.Secret, metav1.UpdateOptions) (*corev1.Secret, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

func newConfigMaps(client kubernetes.Interface, indexer cache.Indexer) *objects {
	api := func(ns string) configMapAPI { return client.CoreV1().ConfigMaps(ns) }
	return &objects{
		kind:    kindConfigMap,
		indexer: indexer,
		pulled:  pulledConfigMap,
		replica: func(src *item, spec source.Spec, m metav1.ObjectMeta) runtime.Object {
			cm := src.obj.(*corev1.ConfigMap)
			return &corev1.ConfigMap{ObjectMeta: m, Data: spec.ConfigMapData(cm.Data), BinaryData: spec.SecretData(cm.BinaryData), Immutable: cm.Immutable}
		},
		create: func(ctx context.Context, obj runtime.Object) error {
			cm := obj.(*corev1.ConfigMap)
			_, err := api(cm.Namespace).Create(ctx, cm, createOpts)
			return err
		},
		update: func(ctx context.Context, obj runtime.Object) error {
			cm := obj.(*corev1.ConfigMap)
			_, err := api(cm.Namespace).Update(ctx, cm, updateOpts)
			return err
		},
		delete: func(ctx context.Context, ns, name string, opts metav1.DeleteOptions) error {
			return api(ns).Delete(ctx, name, opts)
		},
	}
}

type configMapAPI interface {
	Create(context.Context, *corev1.ConfigMap, metav1.CreateOptions) (*corev1.ConfigMap, error)
	Update(context.Context, *corev1.ConfigMap, metav1.UpdateOptions) (*corev1.ConfigMap, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

func isTrue(b *bool) bool { return b != nil && *b }

// replicaMeta is a replica's metadata: what is not courier's is kept from
// existing (nil for a new replica); courier's own keys and the metadata
// copied from the source are set.
func replicaMeta(src metav1.Object, namespace, installation string, want Want, existing metav1.Object) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: src.GetName(), Namespace: namespace}
	labels := map[string]string{}
	annotations := map[string]string{}
	if existing != nil {
		m.ResourceVersion = existing.GetResourceVersion()
		m.UID = existing.GetUID()
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
	annotations[wellknown.ContentHash] = want.Hash
	annotations[wellknown.Installation] = installation
	m.Labels, m.Annotations = labels, annotations
	return m
}

// preconditions make a delete apply only to the object that was seen.
func preconditions(m metav1.Object) metav1.DeleteOptions {
	uid, rv := m.GetUID(), m.GetResourceVersion()
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
}
