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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
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
// source's. A refusal writes nothing and says why on the object.
func (c *Controller) syncPull(ctx context.Context, k key) error {
	seen, _ := c.queue.Take(k)
	o := c.objects[k.Kind]
	t, err := o.get(k.Namespace, k.Name)
	if err != nil || t == nil {
		return err
	}
	r := c.roleOf(t)
	ref, via := r.PullRef, r.PullVia
	if via == "" || t.meta.GetDeletionTimestamp() != nil {
		c.forgetTold(t.meta.GetUID()) // no longer a pull
		return nil
	}
	if _, err := c.namespaces.Get(k.Namespace); err != nil {
		return err // not in the cache yet: retried (quietly) until it is
	}
	src, why := c.pullSource(k, o, t, r)
	if why == servedElsewhere {
		c.logger.Debug("a pull from a namespace another installation serves", zap.Stringer("pull", k))
		return nil
	}
	if why != "" {
		c.refusePull(k, t, r, why)
		return nil
	}
	spec, err := source.Parse(src.meta.GetAnnotations())
	if err != nil {
		c.refusePull(k, t, r, fmt.Sprintf("the source's %v", err))
		return nil
	}
	c.forgetTold(t.meta.GetUID())
	hash := c.hash(src, spec)
	a := t.meta.GetAnnotations()
	held := content.Hash(t.entries())
	if held == hash && a[wellknown.ContentHash] == hash && a[wellknown.PulledFrom] == ref && a[wellknown.Via] == via {
		return nil
	}
	// Neither what courier wrote nor the source's content: someone else
	// wrote it (another tool writing the source's content is no revert).
	reverted := a[wellknown.PulledFrom] == ref && a[wellknown.ContentHash] != held && held != hash
	at := k.Namespace + "/" + k.Name
	if reverted && c.contested(k, t, at, ref) {
		return nil
	}
	ours := map[string]string{wellknown.PulledFrom: ref, wellknown.ContentHash: hash, wellknown.Via: via}
	patch, err := pullPatch(t, src, spec, ours)
	if err != nil {
		return err
	}
	err = c.write(k, seen, opPull, func() error { return c.writer.Patch(ctx, k.Kind, k.Namespace, k.Name, patch) })
	if err == nil && reverted {
		c.reverted(k, t, at, fmt.Sprintf(
			"this %s pulls from %s (%s) and was changed by someone other than courier; it has been reverted to the source's content. Change the source instead, or remove %s",
			k.Kind, ref, via, via))
	}
	return err
}

// servedElsewhere is pullSource's answer for a pull from a namespace
// outside --source-namespaces while other installations run, or may run
// unseen (a scoped view): one of them may serve it, and this one says
// nothing.
const servedElsewhere = "served elsewhere"

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

// pullSource returns the source t pulls from, or why courier does not
// honour the pull.
func (c *Controller) pullSource(k key, o *objects, t *item, r role.Role) (*item, string) {
	ref, via := r.PullRef, r.PullVia
	srcNS, srcName, err := cache.SplitMetaNamespaceKey(ref)
	switch {
	case err != nil || srcNS == "" || srcName == "":
		return nil, "the value must be <namespace>/<name>"
	case srcNS == k.Namespace && srcName == k.Name:
		return nil, "it names this object itself"
	case r.Kind == role.Source:
		return nil, "this object is a source itself (it replicates, allows pulls or is protected): courier keeps it a source and never fills it from another; remove " + via + ", or make another object pull"
	case r.Kind != role.PullTarget:
		return nil, "this object is a courier " + r.Kind.String() + " itself"
	case !c.opts.SourceNamespaces.Match(srcNS) && (c.opts.View.Scoped() || len(c.objects[kindSecret].indexer.ListIndexFuncValues(informers.Installations)) > 1):
		// Not this installation's to serve or refuse: another one serves
		// it, or may (a scoped courier cannot see the digest keys that
		// tell other installations apart).
		return nil, servedElsewhere
	case !c.opts.SourceNamespaces.Match(srcNS):
		return nil, fmt.Sprintf("namespace %s is not an allowed source namespace (--source-namespaces=%s); move the source or add its namespace", srcNS, c.opts.SourceNamespaces)
	case !c.eligible(k.Namespace, srcNS):
		return nil, fmt.Sprintf("courier replicates into namespace %s from %s in no way (the source's own namespace, a system namespace, one in --exclude-namespaces=%s, one labelled %s=disabled, or one being deleted)",
			k.Namespace, srcNS, c.opts.ExcludeNamespaces, wellknown.Replication)
	case t.immutable:
		return nil, "this object is immutable; delete it and create it again without immutable"
	}
	src, err := o.get(srcNS, srcName)
	switch {
	case err != nil || src == nil:
		return nil, fmt.Sprintf("the source %s %s does not exist%s; what this object holds stays as it is", k.Kind, ref, c.unseen())
	case src.typ == corev1.SecretTypeServiceAccountToken:
		return nil, fmt.Sprintf("%s Secrets are never copied", corev1.SecretTypeServiceAccountToken)
	}
	target, err := c.namespaces.Get(k.Namespace)
	if err != nil {
		return nil, fmt.Sprintf("namespace %s is not known yet", k.Namespace) // syncPull waits for it first
	}
	if ok, why := source.PullAllowed(src.meta.GetAnnotations(), via, target); !ok {
		return nil, why
	}
	if content.IsDigested(src.meta) {
		return nil, "courier does not hold the source's values yet" // the cache catches up; its update enqueues this again
	}
	return src, ""
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
	n, err := c.namespaces.Get(ns)
	return err == nil && replica.Eligible(n, srcNS, c.opts.ExcludeNamespaces)
}

// unseen is what an Event saying a source does not exist adds when courier's
// view is scoped.
func (c *Controller) unseen() string {
	if !c.opts.View.Scoped() {
		return ""
	}
	return " (or courier does not see it: outside --watch-namespaces or --resource-label-selector)"
}
