package informers

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Multi is one cache.SharedIndexInformer over several namespaces, each
// watched by an informer of its own (client-go has no informer for a list
// of namespaces; a field selector cannot say "namespace in (…)"). It is
// what --watch-namespaces hands the controllers in place of a cluster-wide
// informer: handlers and indexers go to every part, reads concatenate (List,
// ByIndex) or go to the part of the key's namespace (GetByKey). An object
// lives in one namespace, so the parts never overlap (a part that watches
// Namespace objects holds only the one it is named for). The store is
// read-only: writes belong to the parts' own reflectors.
type Multi struct {
	parts map[string]cache.SharedIndexInformer
	order []string // namespaces, sorted: reads are deterministic
	// skip, if set, reports a namespace whose part is not waited for
	// (HasSynced): courier may not list there now (Reach).
	skip func(namespace string) bool
	// split: the parts watch one kind in the same namespaces, divided by a
	// label (NewSplit), so any part may hold a key.
	split bool
}

var _ cache.SharedIndexInformer = (*Multi)(nil)

// perNamespace is newInformer(namespace) for each namespace of scope
// (Scope.Each) as one informer (whole).
func perNamespace(scope Scope, newInformer func(namespace string) cache.SharedIndexInformer) cache.SharedIndexInformer {
	parts := map[string]cache.SharedIndexInformer{}
	for _, ns := range scope.Each() {
		parts[ns] = newInformer(ns)
	}
	return whole(parts)
}

// whole is the one informer of every namespace (key "") itself, else a
// Multi over parts.
func whole(parts map[string]cache.SharedIndexInformer) cache.SharedIndexInformer {
	if inf, ok := parts[metav1.NamespaceAll]; ok && len(parts) == 1 {
		return inf
	}
	return NewMulti(parts)
}

// NewSplit is one informer over parts that watch the same namespaces and
// divide one kind's objects between them by selectors that complement each
// other (one with a label, one without): GetByKey asks them in the order
// given. An object whose label changes leaves one part and enters the
// other, in either order, so for a moment it may be in both (reads return
// it twice) or in neither: its absence is no evidence that it is gone.
func NewSplit(names []string, parts ...cache.SharedIndexInformer) *Multi {
	m := &Multi{parts: map[string]cache.SharedIndexInformer{}, order: names, split: true}
	for i, name := range names {
		m.parts[name] = parts[i]
	}
	return m
}

// NewMulti returns the informer over parts, by namespace.
func NewMulti(parts map[string]cache.SharedIndexInformer) *Multi {
	return &Multi{parts: parts, order: slices.Sorted(maps.Keys(parts))}
}

func (m *Multi) each(f func(ns string, inf cache.SharedIndexInformer) error) error {
	var errs []error
	for _, ns := range m.order {
		if err := f(ns, m.parts[ns]); err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

// registration is a handler's registration on every part.
type registration struct {
	parts map[string]cache.ResourceEventHandlerRegistration
	skip  func(namespace string) bool
}

func (r registration) HasSynced() bool {
	for ns, p := range r.parts {
		if !p.HasSynced() && !skipped(r.skip, ns) {
			return false
		}
	}
	return true
}

func skipped(skip func(string) bool, ns string) bool { return skip != nil && skip(ns) }

func (r registration) HasSyncedChecker() cache.DoneChecker {
	var parts []cache.DoneChecker
	for _, p := range r.parts {
		parts = append(parts, p.HasSyncedChecker())
	}
	return newAllDone("multi-namespace handler", parts)
}

// allDone is done when every part is.
type allDone struct {
	name string
	done chan struct{}
}

// newAllDone's channel closes once every part's has (one goroutine waits
// for them in turn, and ends with the last).
func newAllDone(name string, parts []cache.DoneChecker) *allDone {
	d := &allDone{name: name, done: make(chan struct{})}
	go func() {
		for _, p := range parts {
			<-p.Done()
		}
		close(d.done)
	}()
	return d
}

func (d *allDone) Name() string          { return d.name }
func (d *allDone) Done() <-chan struct{} { return d.done }

func (m *Multi) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return m.AddEventHandlerWithOptions(h, cache.HandlerOptions{})
}

func (m *Multi) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return m.AddEventHandlerWithOptions(h, cache.HandlerOptions{ResyncPeriod: &resync})
}

func (m *Multi) AddEventHandlerWithOptions(h cache.ResourceEventHandler, o cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	r := registration{parts: map[string]cache.ResourceEventHandlerRegistration{}, skip: m.skip}
	err := m.each(func(ns string, inf cache.SharedIndexInformer) error {
		reg, err := inf.AddEventHandlerWithOptions(h, o)
		r.parts[ns] = reg
		return err
	})
	return r, err
}

func (m *Multi) RemoveEventHandler(handle cache.ResourceEventHandlerRegistration) error {
	r, ok := handle.(registration)
	if !ok {
		return fmt.Errorf("registration %T is not one of this informer's", handle)
	}
	return m.each(func(ns string, inf cache.SharedIndexInformer) error { return inf.RemoveEventHandler(r.parts[ns]) })
}

func (m *Multi) GetStore() cache.Store     { return multiIndexer{m} }
func (m *Multi) GetIndexer() cache.Indexer { return multiIndexer{m} }

// GetController is nil: the parts have controllers, the whole has none.
func (m *Multi) GetController() cache.Controller { return nil }

func (m *Multi) Run(stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-stop; cancel() }()
	m.RunWithContext(ctx)
}

// RunWithContext runs every part and returns when all have stopped.
func (m *Multi) RunWithContext(ctx context.Context) {
	var wg sync.WaitGroup
	for _, inf := range m.parts {
		wg.Go(func() { inf.RunWithContext(ctx) })
	}
	wg.Wait()
}

func (m *Multi) HasSynced() bool {
	for ns, inf := range m.parts {
		if !inf.HasSynced() && !skipped(m.skip, ns) {
			return false
		}
	}
	return true
}

// HasSyncedChecker waits for every part, skip or not: nothing in courier
// asks it (HasSynced is what readiness and the controllers ask).
func (m *Multi) HasSyncedChecker() cache.DoneChecker {
	var parts []cache.DoneChecker
	for _, ns := range m.order {
		parts = append(parts, m.parts[ns].HasSyncedChecker())
	}
	return newAllDone("multi-namespace informer", parts)
}

// LastSyncResourceVersion is the parts' versions, by namespace: resource
// versions of different lists are not comparable, so there is no one.
func (m *Multi) LastSyncResourceVersion() string {
	var b strings.Builder
	for _, ns := range m.order {
		fmt.Fprintf(&b, "%s=%s;", ns, m.parts[ns].LastSyncResourceVersion())
	}
	return b.String()
}

func (m *Multi) SetWatchErrorHandler(h cache.WatchErrorHandler) error {
	return m.each(func(_ string, inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandler(h) })
}

func (m *Multi) SetWatchErrorHandlerWithContext(h cache.WatchErrorHandlerWithContext) error {
	return m.each(func(_ string, inf cache.SharedIndexInformer) error { return inf.SetWatchErrorHandlerWithContext(h) })
}

func (m *Multi) SetTransform(f cache.TransformFunc) error {
	return m.each(func(_ string, inf cache.SharedIndexInformer) error { return inf.SetTransform(f) })
}

func (m *Multi) IsStopped() bool {
	for _, inf := range m.parts {
		if !inf.IsStopped() {
			return false
		}
	}
	return true
}

func (m *Multi) AddIndexers(indexers cache.Indexers) error {
	return m.each(func(_ string, inf cache.SharedIndexInformer) error { return inf.AddIndexers(indexers) })
}

// multiIndexer reads across the parts' indexers; it takes no writes.
type multiIndexer struct{ m *Multi }

var errReadOnly = errors.New("a multi-namespace informer's store is read-only")

func (multiIndexer) Add(any) error                          { return errReadOnly }
func (multiIndexer) Update(any) error                       { return errReadOnly }
func (multiIndexer) Delete(any) error                       { return errReadOnly }
func (multiIndexer) Replace([]any, string) error            { return errReadOnly }
func (multiIndexer) Resync() error                          { return nil }
func (multiIndexer) Bookmark(string)                        {}
func (x multiIndexer) LastStoreSyncResourceVersion() string { return x.m.LastSyncResourceVersion() }

func (x multiIndexer) List() []any {
	var out []any
	for _, ns := range x.m.order {
		out = append(out, x.m.parts[ns].GetIndexer().List()...)
	}
	return x.once(out)
}

// once is objs with each object once: a split's object moving between its
// parts may be in both for a moment; the first part's copy is kept.
func (x multiIndexer) once(objs []any) []any {
	if !x.m.split || len(objs) < 2 {
		return objs
	}
	seen := make(map[string]bool, len(objs))
	return slices.DeleteFunc(objs, func(obj any) bool {
		k, err := cache.MetaNamespaceKeyFunc(obj)
		if err != nil {
			return false
		}
		dup := seen[k]
		seen[k] = true
		return dup
	})
}

func (x multiIndexer) ListKeys() []string {
	var out []string
	for _, ns := range x.m.order {
		out = append(out, x.m.parts[ns].GetIndexer().ListKeys()...)
	}
	return out
}

func (x multiIndexer) Get(obj any) (any, bool, error) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return x.GetByKey(key)
}

// GetByKey asks the part of the key's namespace (of a Namespace's key, its
// name: the part that watches that namespace); a key of a namespace courier
// does not watch is not there.
func (x multiIndexer) GetByKey(key string) (any, bool, error) {
	if x.m.split {
		for _, part := range x.m.order {
			if obj, ok, err := x.m.parts[part].GetIndexer().GetByKey(key); ok || err != nil {
				return obj, ok, err
			}
		}
		return nil, false, nil
	}
	ns, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, false, err
	}
	if ns == "" {
		ns = name
	}
	inf, ok := x.m.parts[ns]
	if !ok {
		return nil, false, nil
	}
	return inf.GetIndexer().GetByKey(key)
}

func (x multiIndexer) Index(name string, obj any) ([]any, error) {
	var out []any
	err := x.m.each(func(_ string, inf cache.SharedIndexInformer) error {
		items, err := inf.GetIndexer().Index(name, obj)
		out = append(out, items...)
		return err
	})
	return x.once(out), err
}

func (x multiIndexer) IndexKeys(name, value string) ([]string, error) {
	var out []string
	err := x.m.each(func(_ string, inf cache.SharedIndexInformer) error {
		keys, err := inf.GetIndexer().IndexKeys(name, value)
		out = append(out, keys...)
		return err
	})
	return out, err
}

func (x multiIndexer) ListIndexFuncValues(name string) []string {
	seen := map[string]bool{}
	for _, ns := range x.m.order {
		for _, v := range x.m.parts[ns].GetIndexer().ListIndexFuncValues(name) {
			seen[v] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

func (x multiIndexer) ByIndex(name, value string) ([]any, error) {
	var out []any
	err := x.m.each(func(_ string, inf cache.SharedIndexInformer) error {
		items, err := inf.GetIndexer().ByIndex(name, value)
		out = append(out, items...)
		return err
	})
	return x.once(out), err
}

// GetIndexers is the first part's: AddIndexers gives every part the same.
func (x multiIndexer) GetIndexers() cache.Indexers {
	if len(x.m.order) == 0 {
		return cache.Indexers{}
	}
	return x.m.parts[x.m.order[0]].GetIndexer().GetIndexers()
}

func (x multiIndexer) AddIndexers(indexers cache.Indexers) error { return x.m.AddIndexers(indexers) }
