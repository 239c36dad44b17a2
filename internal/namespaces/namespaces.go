// Package namespaces holds what courier's caches keep of a namespace, and
// the one test of whether a namespace is going away, from its cached object
// or from the API server's refusal. Every controller and the Event writer
// ask it; it reads and writes nothing.
package namespaces

import (
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/objmeta"
)

// Namespace is what courier's caches hold of a namespace: its metadata as
// an objmeta.Meta with its labels (never its annotations), and whether it
// is going away. About 250 bytes; the typed object with its labels map was
// 930. The informer transform makes it (From).
type Namespace struct {
	objmeta.Meta
	terminating bool
}

// From is the Namespace of ns.
func From(ns *corev1.Namespace) *Namespace {
	out := &Namespace{Meta: objmeta.From(&ns.ObjectMeta, false),
		terminating: ns.DeletionTimestamp != nil || ns.Status.Phase == corev1.NamespaceTerminating}
	out.SetLabels(ns.Labels)
	return out
}

// Named is a namespace of that name with no labels, as tests and plans
// that know only a name ask about one.
func Named(name string) *Namespace {
	return From(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

// Of is the Namespace a cache holds as obj: courier's own form, or a typed
// Namespace (an informer without courier's transform); false for anything
// else.
func Of(obj any) (*Namespace, bool) {
	switch o := obj.(type) {
	case *Namespace:
		return o, true
	case *corev1.Namespace:
		return From(o), true
	}
	return nil, false
}

// Get is namespace name from store, and whether it is there.
func Get(store cache.Store, name string) (*Namespace, bool) {
	obj, ok, err := store.GetByKey(name)
	if err != nil || !ok {
		return nil, false
	}
	return Of(obj)
}

// Labels are the namespace's labels, for a selector to match (no map is
// built).
func (n *Namespace) Labels() labels.Labels { return pairs{n} }

type pairs struct{ n *Namespace }

func (p pairs) Has(key string) bool              { _, ok := p.n.Label(key); return ok }
func (p pairs) Get(key string) string            { v, _ := p.n.Label(key); return v }
func (p pairs) Lookup(key string) (string, bool) { return p.n.Label(key) }

var namespaceKind = schema.EmptyObjectKind

// GetObjectKind is a runtime.Object's.
func (n *Namespace) GetObjectKind() schema.ObjectKind { return namespaceKind }

// DeepCopyObject is a runtime.Object's.
func (n *Namespace) DeepCopyObject() runtime.Object {
	c := *n
	c.Meta = n.Meta.DeepCopy()
	return &c
}

// Terminating reports whether ns is being deleted.
func Terminating(ns *Namespace) bool { return ns.terminating }

// Refused reports whether err is the API server refusing to create an
// object because its namespace is being deleted.
func Refused(err error) bool {
	return apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause)
}
