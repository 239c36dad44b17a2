// Package view is the one owner of "what this courier can see": which
// namespaces it watches (--watch-namespaces, less those whose lists are
// refused now), and which Secrets and ConfigMaps the API server sends it
// (--resource-label-selector). Every decision that acts on an object being
// absent from courier's cache — deleting the replicas of a missing source,
// restoring a source from its backup, adopting, taking a workload over from
// an installation that looks gone, counting an input as missing, refusing a
// pull — asks it first, and acts only on an absence inside the view:
// outside it, courier cannot tell "gone" from "hidden", so it leaves
// everything as it is.
package view

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Where an object lies with respect to courier's view.
type Where int

const (
	// Inside: courier watches it, so its cache is the truth: absent there
	// means gone.
	Inside Where = iota
	// Outside: courier cannot see it (a namespace it does not watch, or may
	// not list in now; labels its selector does not select): its absence
	// says nothing.
	Outside
	// Unknown: its namespace is watched, but the object may exist outside
	// --resource-label-selector; only a read by name (Finder) tells.
	Unknown
)

func (w Where) String() string {
	switch w {
	case Inside:
		return "inside"
	case Outside:
		return "outside"
	}
	return "unknown"
}

// The flags that hide things, as messages name them.
const (
	FlagNamespaces = "--watch-namespaces"
	FlagSelector   = "--resource-label-selector"
)

// View is what one courier sees. The zero View sees everything (the
// cluster-wide install without a selector).
type View struct {
	namespaces map[string]bool // nil: every namespace
	selector   labels.Selector // nil: every Secret and ConfigMap
	// refused reports a watched namespace whose lists the API server
	// refuses now (nil: none).
	refused func(namespace string) bool
}

// New is the view of a courier watching namespaces (none: all) with the
// resource label selector (empty: none); refused, if set, reports a watched
// namespace courier may not list in now (its Role gone with it).
func New(namespaces []string, selector string, refused func(namespace string) bool) (View, error) {
	v := View{refused: refused}
	if len(namespaces) > 0 {
		v.namespaces = map[string]bool{}
		for _, ns := range namespaces {
			v.namespaces[ns] = true
		}
	}
	if selector != "" {
		sel, err := labels.Parse(selector)
		if err != nil {
			return View{}, fmt.Errorf("%s %q: %w", FlagSelector, selector, err)
		}
		v.selector = sel
	}
	return v, nil
}

// Scoped reports whether anything can be outside the view.
func (v View) Scoped() bool { return v.namespaces != nil || v.selector != nil }

// Blind is the watched namespaces courier's caches cannot speak for now
// (refused, or allowed again and not yet listed), sorted.
func (v View) Blind() []string {
	var out []string
	for ns := range v.namespaces {
		if v.refused != nil && v.refused(ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// Selective reports whether --resource-label-selector is set: a Secret or
// ConfigMap courier has never seen may exist in a watched namespace.
func (v View) Selective() bool { return v.selector != nil }

// Namespace is where namespace ns lies: Inside when courier watches it and
// may list in it now.
func (v View) Namespace(ns string) Where {
	if v.namespaces != nil && !v.namespaces[ns] {
		return Outside
	}
	if v.refused != nil && v.refused(ns) {
		return Outside
	}
	return Inside
}

// Absent is where a Secret or ConfigMap of namespace ns that courier's
// cache does not hold may lie: Outside its namespaces, Unknown under a
// selector (it may exist unselected), else Inside (it is gone).
func (v View) Absent(ns string) Where {
	if w := v.Namespace(ns); w != Inside {
		return w
	}
	if v.selector != nil {
		return Unknown
	}
	return Inside
}

// Object is where a Secret or ConfigMap of namespace ns with labels l lies.
func (v View) Object(ns string, l map[string]string) Where {
	if w := v.Namespace(ns); w != Inside {
		return w
	}
	if v.selector != nil && !v.selector.Matches(labels.Set(l)) {
		return Outside
	}
	return Inside
}

// Hiding names the flag that hides namespace ns's objects, or the selector.
func (v View) Hiding(ns string) string {
	switch {
	case v.namespaces != nil && !v.namespaces[ns]:
		return FlagNamespaces + " (not watched)"
	case v.refused != nil && v.refused(ns):
		return FlagNamespaces + " (courier may not list there now, its Role missing, or has not listed it again yet)"
	case v.selector != nil:
		return FlagSelector + "=" + v.selector.String()
	}
	return ""
}

// Finder reads one Secret or ConfigMap by name from the API server, its
// metadata only (never its values), whatever the selector: a list by name,
// which courier's Role allows where it watches. It returns nil when there
// is none.
type Finder interface {
	Find(ctx context.Context, kind, namespace, name string) (*metav1.PartialObjectMetadata, error)
}

// Absence is what an object missing from the cache turns out to be: gone,
// hidden (it may exist outside the view), or neither — it exists inside
// the view and the cache has yet to show it (Lagging): its event is on its
// way, and nothing is to be done meanwhile.
type Absence struct {
	// Gone: it does not exist, and courier would have seen it: act on it.
	Gone bool
	// Hidden names what hides it when it may exist outside the view.
	Hidden string
}

// Lagging reports an object found inside the view that the cache does not
// hold yet.
func (a Absence) Lagging() bool { return !a.Gone && a.Hidden == "" }

// Confirm tells whether the Secret or ConfigMap kind namespace/name, which
// courier's cache does not hold, is gone: Inside the view it is; Outside it
// may exist, so it is not; Unknown, f reads it by name (one request): gone
// only when there is none, hidden when its labels are outside the
// selector, Lagging when they are inside. A nil f counts as finding it
// outside (nothing is deleted on a guess).
func (v View) Confirm(ctx context.Context, f Finder, kind, namespace, name string) (Absence, error) {
	switch v.Absent(namespace) {
	case Inside:
		return Absence{Gone: true}, nil
	case Outside:
		return Absence{Hidden: v.Hiding(namespace)}, nil
	}
	if f == nil {
		return Absence{Hidden: v.Hiding(namespace)}, nil
	}
	m, err := f.Find(ctx, kind, namespace, name)
	if err != nil {
		return Absence{}, fmt.Errorf("read %s %s/%s by name to tell whether it is gone or outside %s: %w", kind, namespace, name, FlagSelector, err)
	}
	if m == nil {
		return Absence{Gone: true}, nil
	}
	if v.Object(namespace, m.Labels) == Inside {
		return Absence{}, nil // selected: the cache has yet to catch up
	}
	return Absence{Hidden: v.Hiding(namespace)}, nil
}
