package informers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Reader reads a Secret or ConfigMap by name, values included, as courier's
// caches see them: a list in its namespace with the field selector
// metadata.name and the caches' own selectors (Scope), which the list
// permission of courier's Role allows (no get). The reloader reads an input
// this way when the cache holds its metadata only (content.MetadataOnly),
// digests it and keeps nothing else of it.
type Reader struct {
	client kubernetes.Interface
	scope  Scope
}

// NewReader reads through client what scope lets the caches hold.
func NewReader(client kubernetes.Interface, scope Scope) Reader {
	return Reader{client: client, scope: scope}
}

// Read returns kind namespace/name, or nil when the caches' selectors let
// them hold no such object.
func (r Reader) Read(ctx context.Context, kind, namespace, name string) (runtime.Object, error) {
	return r.ReadAt(ctx, kind, namespace, name, "")
}

// ReadAt is Read as of resourceVersion version ("": the latest): one list at
// that exact version, which etcd keeps until it is compacted.
func (r Reader) ReadAt(ctx context.Context, kind, namespace, name, version string) (runtime.Object, error) {
	with := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector = byName(kind, name)
		if version != "" {
			o.ResourceVersion, o.ResourceVersionMatch = version, metav1.ResourceVersionMatchExact
		}
		return o
	}
	switch kind {
	case wellknown.KindSecret:
		l, err := r.client.CoreV1().Secrets(namespace).List(ctx, with(r.scope.SecretOptions()))
		if err != nil {
			return nil, err
		}
		return named(l.Items, name), nil
	case wellknown.KindConfigMap:
		l, err := r.client.CoreV1().ConfigMaps(namespace).List(ctx, with(r.scope.ConfigMapOptions()))
		if err != nil {
			return nil, err
		}
		return named(l.Items, name), nil
	}
	return nil, fmt.Errorf("courier reads Secrets and ConfigMaps only, not %s", kind)
}

// named is the item of items called name, or nil (a nil runtime.Object).
func named[T any, P interface {
	*T
	runtime.Object
	GetName() string
}](items []T, name string) runtime.Object {
	for i := range items {
		if p := P(&items[i]); p.GetName() == name {
			return p
		}
	}
	return nil
}
