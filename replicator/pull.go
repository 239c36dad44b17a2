package replicator

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/writer"
)

// opPull counts the writes that fill an object pulling from a source.
const opPull = "pull"

// enqueuePulls enqueues the pull of m, if m pulls from a source, and, with
// pullers, of every object pulling from m.
func (c *Controller) enqueuePulls(kind string, m metav1.Object, pullers bool, seen time.Time) {
	if role.Of(m, "", c.roles).PullVia != "" {
		c.enqueue(key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), Pull: true}, seen)
	}
	if !pullers {
		return
	}
	pulls, _ := c.objects[kind].byIndex(informers.PullsBySource, m.GetNamespace()+"/"+m.GetName())
	for _, p := range pulls {
		c.enqueue(key{Kind: kind, Namespace: p.meta.GetNamespace(), Name: p.meta.GetName(), Pull: true}, seen)
	}
}

// syncPull fills the object k names with the content of the source its
// pull annotation names, when that source allows it the way the other tool
// requires. It keeps the object's type, labels and other annotations: the
// object stays its owner's; courier only keeps its content equal to the
// source's. A refusal writes nothing and says why on the object. Like a
// pair: the facts from the cache (pullFactsOf), a plan (planPull, pure),
// then the plan carried out.
func (c *Controller) syncPull(ctx context.Context, k key) error {
	seen, _ := c.queue.Take(k)
	o := c.objects[k.Kind]
	t, err := o.get(k.Namespace, k.Name)
	if err == nil {
		t, err = c.withContent(ctx, k.Kind, t)
	}
	if err != nil || t == nil {
		return err
	}
	r := c.roleOf(t)
	f, src, err := c.pullFactsOf(ctx, k, o, t, r)
	if err != nil {
		return err // the namespace is not in the cache yet: retried (quietly) until it is
	}
	p := planPull(f)
	switch p.action {
	case pullElsewhere:
		c.logger.Debug("a pull from a namespace another installation serves", zap.Stringer("pull", k))
		return nil
	case pullRefuse:
		c.refusePull(k, t, r, p.why)
		return nil
	}
	c.forgetTold(t.meta.GetUID()) // honoured, or no longer a pull
	if p.action != pullFill {
		return nil
	}
	at := k.Namespace + "/" + k.Name
	if p.reverted && c.contested(k, t, at, f.ref) {
		return nil
	}
	ours := map[string]string{wellknown.PulledFrom: f.ref, wellknown.ContentHash: f.hash, wellknown.Via: f.via}
	patch, err := pullPatch(t, src, f.spec, ours)
	if err != nil {
		return err
	}
	err = c.write(k, seen, opPull, func() error { return c.writer.Patch(ctx, k.Kind, k.Namespace, k.Name, patch) })
	if err == nil && p.reverted {
		c.reverted(k, t, at, fmt.Sprintf(
			"this %s pulls from %s (%s) and was changed by someone other than courier; it has been reverted to the source's content. Change the source instead, or remove %s",
			k.Kind, f.ref, f.via, f.via))
	}
	return err
}

// pullFacts is what planPull needs to know of an object pulling from a
// source (its pull annotation via, naming ref), read from the cache.
type pullFacts struct {
	kind, namespace, name string
	ref, via              string
	role                  role.Kind
	gone                  bool // no longer a pull, or being deleted
	// The source's namespace: allowed by --source-namespaces, and whether
	// other installations serve it, or may (a scoped view cannot tell).
	srcNS, srcName      string
	allowed, elsewhere  bool
	sourceNamespaces    string // --source-namespaces, for the refusal
	excludeNamespaces   string // --exclude-namespaces, likewise
	eligible, immutable bool
	// The source.
	srcMissing, token bool
	unseen            string // what a missing source's refusal adds under a scoped view
	pullRefused       string // the source's refusal of this pull (source.PullAllowed); "" when allowed
	digested          bool   // the cache does not hold its values yet
	spec              source.Spec
	specErr           error
	hash              string // what the pulling object should hold (the source's, spec applied)
	// The pulling object: the content hash of what it holds, and courier's
	// annotations on it.
	held, stamped, pulledFrom, stampedVia string
}

// pullFactsOf reads what the pull of t (role r) needs, and its source
// (nil when there is none to read). It fails while t's namespace is not in
// the cache.
func (c *Controller) pullFactsOf(ctx context.Context, k key, o *objects, t *item, r role.Role) (pullFacts, *item, error) {
	f := pullFacts{kind: k.Kind, namespace: k.Namespace, name: k.Name, ref: r.PullRef, via: r.PullVia, role: r.Kind,
		gone: r.PullVia == "" || t.meta.GetDeletionTimestamp() != nil}
	if f.gone {
		return f, nil, nil
	}
	target, ok := namespaces.Get(c.namespaces, k.Namespace)
	if !ok {
		return f, nil, apierrors.NewNotFound(corev1.Resource("namespace"), k.Namespace)
	}
	a := t.meta.GetAnnotations()
	f.held, f.stamped, f.pulledFrom, f.stampedVia = content.Hash(t.entries()), a[wellknown.ContentHash], a[wellknown.PulledFrom], a[wellknown.Via]
	f.immutable, f.unseen = t.immutable, c.unseen()
	f.sourceNamespaces, f.excludeNamespaces = c.opts.SourceNamespaces.String(), c.opts.ExcludeNamespaces.String()
	if ns, name, err := cache.SplitMetaNamespaceKey(f.ref); err == nil {
		f.srcNS, f.srcName = ns, name
	}
	if f.srcNS == "" || f.srcName == "" {
		return f, nil, nil
	}
	f.allowed = c.opts.SourceNamespaces.Match(f.srcNS)
	f.elsewhere = c.opts.View.Scoped() || len(c.objects[kindSecret].indexer.ListIndexFuncValues(informers.Installations)) > 1
	f.eligible = c.eligible(k.Namespace, f.srcNS)
	src, err := o.get(f.srcNS, f.srcName)
	if err == nil {
		if src, err = c.withContent(ctx, k.Kind, src); err != nil {
			return f, nil, err // not read: not missing either
		}
	}
	if f.srcMissing = err != nil || src == nil; f.srcMissing {
		return f, nil, nil
	}
	f.token = src.typ == corev1.SecretTypeServiceAccountToken
	if ok, why := source.PullAllowed(src.meta.GetAnnotations(), f.via, target); !ok {
		f.pullRefused = why
	}
	if f.digested = content.IsDigested(src.meta); f.digested {
		return f, src, nil
	}
	if f.spec, f.specErr = source.Parse(src.meta.GetAnnotations()); f.specErr == nil {
		f.hash = c.hash(src, f.spec)
	}
	return f, src, nil
}

// pullAction is what syncing a pull does.
type pullAction int

const (
	pullNothing   pullAction = iota // no longer a pull, or it holds the source's content
	pullElsewhere                   // another installation's to serve or refuse: say nothing
	pullRefuse                      // not honoured: say why on the object (once per cause)
	pullFill                        // write the source's content into it
)

// pullPlan is what a pull's sync does, and why.
type pullPlan struct {
	action pullAction
	why    string // pullRefuse's cause
	// reverted: the write undoes someone else's change to the object.
	reverted bool
}

// planPull decides a pull's sync from its facts alone: the first refusal
// that applies, in order, or whether to fill it. It reads nothing and
// writes nothing.
func planPull(f pullFacts) pullPlan {
	refuse := func(why string) pullPlan { return pullPlan{action: pullRefuse, why: why} }
	switch {
	case f.gone:
		return pullPlan{action: pullNothing}
	case f.srcNS == "" || f.srcName == "":
		return refuse("the value must be <namespace>/<name>")
	case f.srcNS == f.namespace && f.srcName == f.name:
		return refuse("it names this object itself")
	case f.role == role.Source:
		return refuse("this object is a source itself (it replicates, allows pulls or is protected): courier keeps it a source and never fills it from another; remove " + f.via + ", or make another object pull")
	case f.role != role.PullTarget:
		return refuse("this object is a courier " + f.role.String() + " itself")
	case !f.allowed && f.elsewhere:
		// Not this installation's to serve or refuse: another one serves
		// it, or may (a scoped courier cannot see the digest keys that
		// tell other installations apart).
		return pullPlan{action: pullElsewhere}
	case !f.allowed:
		return refuse(fmt.Sprintf("namespace %s is not an allowed source namespace (--source-namespaces=%s); move the source or add its namespace", f.srcNS, f.sourceNamespaces))
	case !f.eligible:
		return refuse(fmt.Sprintf("courier replicates into namespace %s from %s in no way (the source's own namespace, a system namespace, one in --exclude-namespaces=%s, one labelled %s=disabled, or one being deleted)",
			f.namespace, f.srcNS, f.excludeNamespaces, wellknown.Replication))
	case f.immutable:
		return refuse("this object is immutable; delete it and create it again without immutable")
	case f.srcMissing:
		return refuse(fmt.Sprintf("the source %s %s does not exist%s; what this object holds stays as it is", f.kind, f.ref, f.unseen))
	case f.token:
		return refuse(fmt.Sprintf("%s Secrets are never copied", corev1.SecretTypeServiceAccountToken))
	case f.pullRefused != "":
		return refuse(f.pullRefused)
	case f.digested:
		return refuse("courier does not hold the source's values yet") // the cache catches up; its update enqueues this again
	case f.specErr != nil:
		return refuse(fmt.Sprintf("the source's %v", f.specErr))
	case f.held == f.hash && f.stamped == f.hash && f.pulledFrom == f.ref && f.stampedVia == f.via:
		return pullPlan{action: pullNothing}
	}
	// Neither what courier wrote nor the source's content: someone else
	// wrote it (another tool writing the source's content is no revert).
	return pullPlan{action: pullFill, reverted: f.pulledFrom == f.ref && f.stamped != f.held && f.held != f.hash}
}

// refusePull tells t's owner why its pull is not honoured: once per cause
// (a source change, a resync or a new term that finds the same cause says
// nothing again).
func (c *Controller) refusePull(k key, t *item, r role.Role, why string) {
	msg := fmt.Sprintf("%s=%q is not honoured: %s. Nothing is written to this %s until that changes", r.PullVia, r.PullRef, why, k.Kind)
	if c.tellOnce(t.meta.GetUID(), msg) {
		c.recorder.Event(t.obj, corev1.EventTypeWarning, wellknown.ReasonPullRefused, msg)
	}
}

// tellOnce reports whether msg is news about the object uid: not the last
// thing told of it (told is forgotten when the object goes, forgetTold).
func (c *Controller) tellOnce(uid types.UID, msg string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	said := c.told[uid] == msg
	c.told[uid] = msg
	return !said
}

// forgetTold drops the cause last told of an object's pull: it is
// honoured now, no longer a pull, or gone.
func (c *Controller) forgetTold(uid types.UID) {
	c.mu.Lock()
	delete(c.told, uid)
	c.mu.Unlock()
}

// pullPatch is the JSON patch that fills t, an object pulling from src,
// with the content spec says and courier's annotations ours: its content
// replaced whole, nothing else of it touched (its type, labels, other
// annotations and kubectl's last-applied configuration stay its owner's, and
// the cache need not hold them), and only the version of t that was seen
// (its resourceVersion, a precondition).
func pullPatch(t, src *item, spec source.Spec, ours map[string]string) ([]byte, error) {
	ops := []map[string]any{{"op": "replace", "path": "/metadata/resourceVersion", "value": t.meta.GetResourceVersion()}}
	switch s := src.obj.(type) {
	case *corev1.Secret:
		ops = append(ops, map[string]any{"op": "add", "path": "/data", "value": orEmpty(spec.SecretData(s.Data))})
	case *corev1.ConfigMap:
		ops = append(ops,
			map[string]any{"op": "add", "path": "/data", "value": orEmpty(spec.ConfigMapData(s.Data))},
			map[string]any{"op": "add", "path": "/binaryData", "value": orEmpty(spec.SecretData(s.BinaryData))})
	default:
		return nil, fmt.Errorf("the source %s holds no values", src.ref())
	}
	for _, k := range slices.Sorted(maps.Keys(ours)) {
		// t has annotations: its pull annotation is one.
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/annotations/" + writer.JSONPointer(k), "value": ours[k]})
	}
	return json.Marshal(ops)
}

func orEmpty[V any](m map[string]V) map[string]V {
	if m == nil {
		return map[string]V{}
	}
	return m
}

// eligible reports whether namespace ns, from the cache, may receive
// copies of a source in srcNS (a namespace not yet in the cache may not).
func (c *Controller) eligible(ns, srcNS string) bool {
	n, ok := namespaces.Get(c.namespaces, ns)
	return ok && replica.Eligible(n, srcNS, c.opts.ExcludeNamespaces)
}

// unseen is what an Event saying a source does not exist adds when courier's
// view is scoped.
func (c *Controller) unseen() string {
	if !c.opts.View.Scoped() {
		return ""
	}
	return " (or courier does not see it: outside --watch-namespaces or --resource-label-selector)"
}
