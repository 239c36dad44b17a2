package informers

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Contents is what courier read of the Secrets and ConfigMaps its cache
// holds as their metadata only (content.Read false): a source's values or
// a consumed input's digests, read by name when a controller needs them
// (Of) and kept for the UID and resourceVersion they were read at, until
// the cache sees the object change or go (Handler). What is kept follows
// the transform's rule: the values of what courier copies (keep), the
// digests of anything else, never another object's values.
type Contents struct {
	read   func(ctx context.Context, kind, namespace, name string) (any, error)
	cached func(kind, namespace, name string) (metav1.Object, bool)
	keep   KeepValues

	mu   sync.Mutex
	held map[types.UID]readAt
}

// readAt is an object as read, at its resourceVersion.
type readAt struct {
	version string
	obj     any // the object with its values (keep), or content.DigestObject
}

// NewContents reads through read (Reader.Read) what the cache (cached:
// the object of kind namespace/name it holds) holds as metadata only.
func NewContents(read func(ctx context.Context, kind, namespace, name string) (any, error), cached func(kind, namespace, name string) (metav1.Object, bool), roles role.Config) *Contents {
	return &Contents{read: read, cached: cached, keep: SourcesIn(roles), held: map[types.UID]readAt{}}
}

// Of is the cached object m of kind with its content: m itself when the
// cache holds its content, else what was read of it at its resourceVersion
// or a newer one, else a read now. A read that finds the object gone or
// replaced since the cache saw it is an error (the caller retries once the
// cache catches up): it is never taken for a missing object.
func (c *Contents) Of(ctx context.Context, kind string, m metav1.Object) (any, error) {
	if content.Read(m) {
		return m, nil
	}
	c.mu.Lock()
	r, ok := c.held[m.GetUID()]
	c.mu.Unlock()
	if ok && !olderVersion(r.version, m.GetResourceVersion()) {
		return r.obj, nil
	}
	obj, err := c.read(ctx, kind, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s: %w", kind, m.GetNamespace(), m.GetName(), err)
	}
	got, ok := obj.(metav1.Object)
	if !ok || got.GetUID() != m.GetUID() {
		return nil, fmt.Errorf("%s %s/%s is gone or replaced since courier's cache saw it; retried once the cache catches up", kind, m.GetNamespace(), m.GetName())
	}
	trim(obj) // never kubectl's last-applied configuration: it may repeat the values
	_, typ, _, _ := content.Fields(obj)
	if c.keep(got, typ) != role.Values {
		obj = content.DigestObject(obj, role.Marked(got))
	}
	c.mu.Lock()
	c.held[got.GetUID()] = readAt{version: got.GetResourceVersion(), obj: obj}
	c.mu.Unlock()
	// Deleted meanwhile (its delete handler may have run before it was
	// held): it goes with it.
	if now, ok := c.cached(kind, m.GetNamespace(), m.GetName()); !ok || now.GetUID() != m.GetUID() {
		c.forget(m.GetUID())
	}
	return obj, nil
}

// NewContents is Contents for s's Secrets and ConfigMaps, read through read
// (Reader.Read), its handler added to both informers. Call it before Start.
func (s *Set) NewContents(read func(ctx context.Context, kind, namespace, name string) (any, error), roles role.Config) (*Contents, error) {
	informerOf := map[string]cache.SharedIndexInformer{wellknown.KindSecret: s.Secrets.Informer(), wellknown.KindConfigMap: s.ConfigMaps.Informer()}
	c := NewContents(read, func(kind, namespace, name string) (metav1.Object, bool) {
		obj, ok, _ := informerOf[kind].GetIndexer().GetByKey(namespace + "/" + name)
		m, isMeta := obj.(metav1.Object)
		return m, ok && isMeta
	}, roles)
	for kind, inf := range informerOf {
		if _, err := inf.AddEventHandler(c.Handler()); err != nil {
			return nil, fmt.Errorf("%s contents handler: %w", kind, err)
		}
	}
	return c, nil
}

// Len is how many objects' contents are held.
func (c *Contents) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.held)
}

func (c *Contents) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.held, uid)
	c.mu.Unlock()
}

// Handler keeps what was read only as long as it is what the object holds:
// add it to the informers of Secrets and ConfigMaps. An update to a newer
// version than the one read, a replacement under a new UID and a deletion
// drop it.
func (c *Contents) Handler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(oldObj, newObj any) {
			om, err1 := meta.Accessor(oldObj)
			nm, err2 := meta.Accessor(newObj)
			if err1 != nil || err2 != nil {
				return
			}
			if om.GetUID() != nm.GetUID() {
				c.forget(om.GetUID())
			}
			c.mu.Lock()
			if r, ok := c.held[nm.GetUID()]; ok && olderVersion(r.version, nm.GetResourceVersion()) {
				delete(c.held, nm.GetUID())
			}
			c.mu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if m, err := meta.Accessor(Unwrap(obj)); err == nil {
				c.forget(m.GetUID())
			}
		},
	}
}

// olderVersion reports whether resourceVersion a is older than b: both numbers
// (every API server writes them so), a below b; other text is older when
// it differs (it cannot be ordered, so it is read again).
func olderVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return a != b
	}
	return x < y
}
