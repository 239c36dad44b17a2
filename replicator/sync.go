package replicator

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/clusters"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// key is one unit of work. With Target empty it is a source: sync fans out
// into the pairs. Otherwise it is the pair (source, target namespace).
type key struct {
	Kind      string
	Namespace string // the source's
	Name      string
	Target    string
	// Cluster is the cluster Target is in: "" for this one, else the name
	// of a cluster courier replicates into (remote.go). With Kind and
	// Target empty, the key is that cluster itself (syncCluster).
	Cluster string
	// Pull: the object Namespace/Name pulls from a source (see syncPull).
	Pull bool
}

func (k key) sourceRef() string { return k.Namespace + "/" + k.Name }
func (k key) String() string {
	if k.Pull {
		return k.Kind + " " + k.sourceRef() + " (pull)"
	}
	if k.Kind == "" {
		return "cluster " + k.Cluster
	}
	if k.Target == "" {
		return k.Kind + " " + k.sourceRef()
	}
	return k.Kind + " " + k.sourceRef() + " → " + k.where()
}

// where names the pair's target namespace: "team-a", or "team-a in
// cluster prod-eu" for another cluster's.
func (k key) where() string {
	if k.Cluster == "" {
		return k.Target
	}
	return k.Target + " in cluster " + k.Cluster
}

// replicaRef names the pair's replica for the guard's budget:
// "namespace/name", and "cluster:namespace/name" in another cluster.
func (k key) replicaRef() string {
	if k.Cluster == "" {
		return k.Target + "/" + k.Name
	}
	return k.Cluster + ":" + k.Target + "/" + k.Name
}

// olderFirst orders sources oldest first (creation time, then namespace).
func olderFirst(a, b *item) bool {
	ta, tb := a.meta.GetCreationTimestamp(), b.meta.GetCreationTimestamp()
	if !ta.Equal(&tb) {
		return ta.Before(&tb)
	}
	return a.ref() < b.ref()
}

// facts are what a source's labels and annotations say: its role, and, for
// a source courier acts on, where its replicas go and what they hold. They
// are read once per item — one version of the object, read for one sync —
// however many times a sync asks (factsOf).
type facts struct {
	role role.Role
	// ok: a source courier acts on; else problem is the Event reason its
	// owner must hear, if any.
	ok      bool
	problem string
	// targets and spec, with the error of each (ok only).
	targets    source.Targets
	targetsErr error
	spec       source.Spec
	specErr    error
	// clusters is what courier.dev/replicate-to-clusters selects (nil:
	// none), with its error (ok only).
	clusters    labels.Selector
	clustersErr error
}

// invalid reports whether the source's selector, or another of its
// annotations, does not parse.
func (f *facts) invalid() bool { return f.targetsErr != nil || f.specErr != nil }

// factsOf gathers src's facts, once.
func (c *Controller) factsOf(src *item) *facts {
	if src.facts != nil {
		return src.facts
	}
	f := &facts{role: c.roleOf(src)}
	switch {
	case !f.role.Pushes:
	case f.role.Problem != "":
		f.problem = f.role.Problem
	case f.role.Kind != role.Source:
		// a replica, of any installation, is never a source
	case src.meta.GetDeletionTimestamp() != nil || content.IsDigested(src.meta):
	default:
		f.ok = true
		a := src.meta.GetAnnotations()
		f.targets, f.targetsErr = source.TargetsOf(a, c.opts.Compat)
		f.spec, f.specErr = source.Parse(a)
		f.clusters, f.clustersErr = clusters.Selector(a)
		if f.clusters != nil && f.targetsErr == nil && !f.targets.Native() {
			f.clustersErr = fmt.Errorf("%s needs %s: replicas made through another tool's annotations (%s) stay in this cluster. Replace it with %s to replicate across clusters",
				wellknown.ReplicateToClusters, wellknown.ReplicateTo, f.targets.Via, wellknown.ReplicateTo)
		}
	}
	src.facts = f
	return f
}

// decide is what the pair (src, ns) needs, ns being a namespace of cluster
// in (nil: this cluster). src or ns may be nil (gone).
func (c *Controller) decide(src *item, ns *namespaces.Namespace, in *informers.Remote) decision {
	if ns == nil || namespaces.Terminating(ns) {
		return leave
	}
	if src == nil {
		return remove
	}
	f := c.factsOf(src)
	if !f.ok {
		return remove
	}
	if f.invalid() || in != nil && f.clustersErr != nil {
		return leave // existing replicas stay until the annotation is fixed
	}
	if in == nil && replica.Eligible(ns, src.meta.GetNamespace(), c.opts.ExcludeNamespaces) && f.targets.Matches(ns) {
		return ensure
	}
	// In another cluster, a namespace named like the source's is another
	// namespace: it may receive the replica.
	if in != nil && f.clusters != nil && in.Selected(f.clusters) && replica.Eligible(ns, "", c.opts.ExcludeNamespaces) && f.targets.Matches(ns) {
		return ensure
	}
	return remove
}

// identity is what this installation asks replica.OwnerOf with for
// replicas in cluster in (nil: this cluster).
func (c *Controller) identity(in *informers.Remote) string {
	if in == nil {
		return c.opts.Installation
	}
	return replica.Identity(c.opts.Installation, c.opts.ClusterName, in.Name)
}

// claimant returns the source that should own the replica named name in ns:
// the oldest of the sources with that name that want a replica there. A
// source whose selector is invalid changes nothing, so it keeps claiming the
// replica it holds (existing, the object of that name in ns, or nil).
func (c *Controller) claimant(ctx context.Context, o *objects, name string, ns *namespaces.Namespace, in *informers.Remote, existing *item) (*item, error) {
	cands, err := o.byIndex(informers.SourcesByName, name)
	if err != nil {
		return nil, err
	}
	for i := range cands {
		// Its type decides whether it may be a source at all.
		if cands[i], err = c.withContent(ctx, o.kind, cands[i]); err != nil {
			return nil, err
		}
	}
	holder := ""
	if existing != nil {
		if owner, managed := replica.OwnerOf(existing.meta, c.identity(in)); managed {
			holder = owner
		}
	}
	var claimants []*item
	for _, s := range cands {
		if c.decide(s, ns, in) == ensure || (s.ref() == holder && c.factsOf(s).ok && c.factsOf(s).invalid()) {
			claimants = append(claimants, s)
		}
	}
	if len(claimants) == 0 {
		return nil, nil
	}
	sort.Slice(claimants, func(i, j int) bool { return olderFirst(claimants[i], claimants[j]) })
	return claimants[0], nil
}

// syncSource checks a source and fans out to its pairs: every eligible
// namespace its selector matches, and every namespace that holds one of its
// replicas. It reads the cache, and the source by name when the cache holds
// its metadata only (withContent).
func (c *Controller) syncSource(ctx context.Context, k key) error {
	seen, ok := c.queue.Take(k)
	if !ok {
		seen = c.clock.Now()
	}
	o := c.objects[k.Kind]
	src, err := o.get(k.Namespace, k.Name)
	if err == nil {
		src, err = c.withContent(ctx, k.Kind, src)
	}
	if err != nil {
		c.queue.Remember(k, seen)
		return err
	}
	replicas, err := o.byIndex(informers.ReplicasBySource, k.sourceRef())
	if err != nil {
		return err
	}
	enqueueReplicas := func() {
		for _, r := range replicas {
			c.enqueue(key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Target: r.meta.GetNamespace()}, seen)
		}
		c.enqueueRemoteReplicas(k, seen)
	}
	if src == nil {
		enqueueReplicas()
		return nil
	}
	f := c.factsOf(src)
	ok, problem := f.ok, f.problem
	switch {
	case problem == wellknown.ReasonSourceNotAllowed && c.servedElsewhere(replicas):
		// Another courier installation replicates it: not a mistake to report.
	case problem == wellknown.ReasonSourceNotAllowed:
		c.warn(src, wellknown.ReasonSourceNotAllowed, fmt.Sprintf(
			"namespace %s is not an allowed source namespace (--source-namespaces=%s), so %s is ignored; move the source to an allowed namespace or add this namespace to --source-namespaces",
			k.Namespace, c.opts.SourceNamespaces, wellknown.ReplicateTo))
	case problem == wellknown.ReasonSourceNotReplicable:
		c.warn(src, wellknown.ReasonSourceNotReplicable, fmt.Sprintf(
			"%s Secrets are never replicated: a copy would hand this ServiceAccount's identity to other namespaces; remove %s",
			corev1.SecretTypeServiceAccountToken, wellknown.ReplicateTo))
	}
	if !ok {
		enqueueReplicas()
		return nil
	}
	targets, spec := f.targets, f.spec
	if err := f.targetsErr; err != nil {
		c.metrics.invalidSelectors.WithLabelValues(k.Kind).Inc()
		c.logger.Warn("invalid replicate-to selector; existing replicas are kept", zap.Stringer("source", k), zap.Error(err))
		c.warn(src, wellknown.ReasonInvalidSelector, err.Error()+". Nothing changes until it is fixed")
		return nil
	}
	if err := f.specErr; err != nil {
		var bad *source.Error
		errors.As(err, &bad)
		c.metrics.invalidAnnotations.WithLabelValues(k.Kind, bad.Annotation).Inc()
		c.logger.Warn("invalid source annotation; existing replicas are kept",
			zap.Stringer("source", k), zap.String("annotation", bad.Annotation), zap.String("value", bad.Value), zap.Error(err))
		c.warn(src, wellknown.ReasonInvalidAnnotation, err.Error()+". Nothing changes until it is fixed")
		return nil
	}
	if err := f.clustersErr; err != nil {
		c.metrics.invalidAnnotations.WithLabelValues(k.Kind, wellknown.ReplicateToClusters).Inc()
		c.logger.Warn("invalid replicate-to-clusters; replicas in other clusters are kept as they are", zap.Stringer("source", k), zap.Error(err))
		c.warn(src, wellknown.ReasonInvalidAnnotation, err.Error()+". Its replicas in other clusters are left as they are until it is fixed")
	}
	if missing := spec.Missing(src.has); len(missing) > 0 {
		c.warn(src, wellknown.ReasonReplicateKeyMissing, fmt.Sprintf(
			"%s lists %s, which this %s does not have; its replicas hold the other listed keys. Add the key to the source or remove it from the list",
			wellknown.ReplicateKeys, strings.Join(missing, ", "), k.Kind))
	}
	for _, obj := range c.namespaces.List() {
		if ns, ok := namespaces.Of(obj); ok && replica.Eligible(ns, k.Namespace, c.opts.ExcludeNamespaces) && targets.Matches(ns) {
			c.enqueue(key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Target: ns.GetName()}, seen)
		}
	}
	c.fanOutToClusters(k, f, seen)
	enqueueReplicas()
	return nil
}

// servedElsewhere reports whether one of replicas was made by another
// courier installation.
func (c *Controller) servedElsewhere(replicas []*item) bool {
	for _, r := range replicas {
		if inst, ok := objmeta.Annotation(r.meta, wellknown.Installation); ok && inst != c.opts.Installation {
			return true
		}
	}
	return false
}

// syncPair makes the target namespace hold exactly what the pair needs: it
// reads the facts from the cache, plans (planPair), and carries the plan out.
func (c *Controller) syncPair(ctx context.Context, k key) error {
	seen, _ := c.queue.Take(k)
	o := c.objects[k.Kind]
	src, err := o.get(k.Namespace, k.Name)
	if err == nil {
		src, err = c.withContent(ctx, k.Kind, src)
	}
	if err != nil {
		c.queue.Remember(k, seen)
		return err
	}
	pl, err := c.placeOf(k, o)
	switch {
	case errors.Is(err, errNoCluster):
		c.states.forget(k)
		return nil
	case errors.Is(err, errUnavailable), errors.Is(err, errUnreachable):
		// Courier's caches cannot speak for the target now (a watched
		// namespace refused or not listed again yet; a cluster that does
		// not answer): what they lack there is not gone. The pair waits,
		// with backoff, or until the namespace or cluster is back.
		c.queue.Remember(k, seen)
		return err
	case err != nil:
		return err
	}
	if k.Cluster != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, remoteWriteTimeout)
		defer cancel()
	}
	if pl.in == nil && pl.existing != nil && c.decide(src, pl.ns, pl.in) == ensure {
		// What holds the name here is compared with what the pair wants: a
		// replica (or anything in the way) the cache holds the metadata of
		// only is read, its digests kept. (Another cluster's cache holds
		// every object it may compare whole.)
		if pl.existing, err = c.contentOf(ctx, k.Kind, pl.existing); err != nil {
			c.queue.Remember(k, seen)
			return err
		}
	}
	if (src == nil || src.meta.GetDeletionTimestamp() != nil) && c.opts.Guard != nil && c.opts.Guard.Restoring(k.Kind, k.Namespace, k.Name) {
		return nil // the guard restores the source: keep its replicas, whatever the deletion
	}
	return c.syncPairAt(ctx, k, seen, o, src, pl)
}

// syncPairAt plans and carries out pair k, its source src and its target
// pl as read.
func (c *Controller) syncPairAt(ctx context.Context, k key, seen time.Time, o *objects, src *item, pl place) error {
	existing := pl.existing
	f, err := c.pairFacts(ctx, k, o, src, pl)
	if err != nil {
		return err
	}
	p := planPair(f)
	if p.outOfView != "" {
		c.outOfView(k, existing, p.outOfView)
	} else if f.want == ensure && existing != nil {
		if owner, _ := replica.OwnerOf(existing.meta, f.installation); owner == f.ref {
			c.forgetTold(existing.meta.GetUID()) // its source is in view: told anew if it leaves again
		}
	}
	switch p.state {
	case forgetState:
		c.states.forget(k)
		if c.opts.Guard != nil {
			c.opts.Guard.Forget(k.Kind, k.replicaRef())
		}
	case inSyncState:
		c.states.set(k, nil)
	}

	switch p.action {
	case none:
		return nil
	case conflict:
		c.conflict(k, src, p.reason)
		return nil
	case handOver:
		winnerNS, _, _ := cache.SplitMetaNamespaceKey(f.claimant)
		c.enqueue(key{Kind: k.Kind, Namespace: winnerNS, Name: k.Name, Target: k.Target, Cluster: k.Cluster}, seen)
		return nil
	case del:
		if c.heldByFlapping(k, seen) {
			return nil
		}
		return c.write(k, seen, opDelete, func() error {
			return pl.writer.Delete(ctx, k.Kind, existing.meta)
		})
	case create:
		if c.heldByFlapping(k, seen) {
			return nil
		}
	}
	return c.writePair(ctx, k, seen, o, src, pl, f, p)
}

// writePair makes the write of plan p for pair k that puts the source's
// content there: create, update, or recreate (delete, then create). A
// revert of someone else's change first asks the guard's budget.
func (c *Controller) writePair(ctx context.Context, k key, seen time.Time, o *objects, src *item, pl place, f pairFacts, p plan) error {
	existing := pl.existing
	meta := func(existing metav1.Object) metav1.ObjectMeta {
		return replicaMeta(src.meta, k.Target, c.opts.Installation, pl.sourceCluster, k.Cluster, f.Want, existing)
	}
	if p.action == create {
		err := c.write(k, seen, opCreate, func() error {
			err := pl.writer.Create(ctx, o.replica(src, f.spec, meta(nil)))
			return err
		})
		if apierrors.IsAlreadyExists(err) && k.Cluster != "" {
			return c.takenInCluster(ctx, k, seen, o, src, pl, err)
		}
		if apierrors.IsAlreadyExists(err) && (k.Kind == kindSecret || len(c.opts.ScopeLabels) > 0) && c.queue.NumRequeues(k) > 0 {
			// A retry later the cache still has nothing of that name: it is
			// a Secret courier never watches (type helm.sh/release.v1), or an
			// object outside --resource-label-selector that courier did not
			// create (one it did, the writer adopts). Report it like any
			// other object courier did not create; the error keeps the pair
			// retrying with backoff, for courier would not see it go.
			why := fmt.Sprintf("a Secret of a type courier does not watch, e.g. %s", wellknown.HelmReleaseType)
			if len(c.opts.ScopeLabels) > 0 {
				why += ", or an object outside --resource-label-selector: one courier did not create, or another source's replica, which the older source keeps"
			}
			c.conflict(k, src, fmt.Sprintf("%s exists and is not this source's replica (%s); it is left untouched", f.object, why))
			return err
		}
		c.states.set(k, err)
		return err
	}

	// update or recreate: a revert of someone else's change first asks the
	// guard's budget. Its Events go on the replica, or, in another
	// cluster, on the source.
	ref := k.sourceRef()
	on := existing
	if k.Cluster != "" {
		on = src
	}
	if p.reverted && c.contested(k, on, k.replicaRef(), ref) {
		c.states.put(k, StateContested)
		return nil
	}
	var err error
	if p.action == recreate {
		err = c.write(k, seen, opRecreate, func() error {
			if err := pl.writer.Delete(ctx, k.Kind, existing.meta); err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			err := pl.writer.Create(ctx, o.replica(src, f.spec, meta(nil)))
			return err
		})
	} else {
		err = c.write(k, seen, opUpdate, func() error {
			err := pl.writer.Update(ctx, o.replica(src, f.spec, meta(existing.meta)))
			return err
		})
	}
	c.states.set(k, err)
	if err == nil && p.reverted {
		msg := fmt.Sprintf("this replica of %s was changed by someone other than courier and has been reverted to the source's content; change the source %s instead", ref, ref)
		if k.Cluster != "" {
			msg = fmt.Sprintf("the replica %s/%s in cluster %s was changed by someone other than courier and has been reverted to this source's content; change this source instead", k.Target, k.Name, k.Cluster)
		}
		c.reverted(k, on, k.replicaRef(), msg)
	}
	return err
}

// contested asks the guard's budget before courier reverts someone else's
// change to obj (at ref, "namespace/name"; its source is src): when
// something keeps changing it, courier backs off, says so once, and k
// comes back after the backoff.
func (c *Controller) contested(k key, obj *item, ref, src string) bool {
	if c.opts.Guard == nil {
		return false
	}
	wait, newly := c.opts.Guard.Allow(k.Kind, ref)
	if wait <= 0 {
		return false
	}
	if newly {
		c.logger.Warn("object keeps being changed by another writer; backing off", zap.Stringer("key", k), zap.Duration("backoff", wait))
		copyOf := "this copy of " + src
		if k.Cluster != "" {
			copyOf = fmt.Sprintf("the replica %s/%s in cluster %s", k.Target, k.Name, k.Cluster)
		}
		c.recorder.Event(obj.obj, corev1.EventTypeWarning, wellknown.ReasonReplicaContested, fmt.Sprintf(
			"something keeps changing %s (more than 5 reverts in a minute); courier stops reverting for %s. Find the other writer and stop it, or change the source %s instead",
			copyOf, wait, src))
	}
	c.queue.AddAfter(k, wait, time.Time{})
	return true
}

// reverted records a revert of someone else's change to obj (at ref).
func (c *Controller) reverted(k key, obj *item, ref, msg string) {
	if c.opts.Guard != nil {
		c.opts.Guard.Reverted(k.Kind, ref)
	}
	c.metrics.reverts.WithLabelValues(k.Kind).Inc()
	c.recorder.Event(obj.obj, corev1.EventTypeWarning, wellknown.ReasonReplicaReverted, msg)
}

// pairFacts reads from the cache what planPair needs to know about the pair
// k: src is its source (nil when gone), pl its target.
func (c *Controller) pairFacts(ctx context.Context, k key, o *objects, src *item, pl place) (pairFacts, error) {
	existing, ns := pl.existing, pl.ns
	f := pairFacts{
		installation:  c.identity(pl.in),
		ref:           k.sourceRef(),
		want:          c.decide(src, ns, pl.in),
		namespaceGone: ns == nil,
		object:        k.Kind + " " + k.Target + "/" + k.Name,
	}
	if k.Cluster != "" {
		f.object += " in cluster " + k.Cluster
	}
	if f.want == ensure { // decide said ensure: its annotations parsed
		spec, targets := c.factsOf(src).spec, c.factsOf(src).targets
		f.spec, f.typ, f.immutable = spec, spec.Type(src.typ), src.immutable
		f.Want = replica.Want{Hash: c.hash(src, spec), Copied: c.copied(spec, src.meta.GetLabels(), src.meta.GetAnnotations())}
		if !targets.Native() {
			f.Via = targets.Via
		}
	}
	if existing != nil {
		e := &replicaFacts{meta: existing.meta, typ: existing.typ, immutable: existing.immutable}
		if f.want == ensure {
			e.hash = content.Hash(existing.entries())
		}
		owner, managed := replica.OwnerOf(existing.meta, f.installation)
		if managed && owner != f.ref {
			e.ownerIsSource = c.isSource(o, owner)
			blind, err := c.cannotSpeakFor(o, owner)
			if err != nil {
				return f, err
			}
			if !e.ownerIsSource && f.want == ensure && blind {
				// Taking another source's replica over is acting on its
				// source's absence: only inside the view.
				a, err := c.absence(ctx, k.Kind, owner)
				if err != nil {
					return f, err
				}
				e.ownerHidden, e.ownerLagging = a.Hidden, a.Lagging()
			}
		}
		if managed && owner == f.ref && src == nil && f.want == remove {
			a, err := c.absence(ctx, k.Kind, owner)
			if err != nil {
				return f, err
			}
			f.sourceHidden, f.sourceLagging = a.Hidden, a.Lagging()
		}
		f.existing = e
	}
	if ns != nil && (f.want == ensure || (f.want == remove && existing != nil)) {
		winner, err := c.claimant(ctx, o, k.Name, ns, pl.in, existing)
		if err != nil {
			return f, err
		}
		if winner != nil {
			f.claimant = winner.ref()
		}
	}
	return f, nil
}

// absence is what the source ref ("namespace/name") of kind, which the
// cache does not hold, turns out to be (view.Confirm: under
// --resource-label-selector, one read by name tells).
func (c *Controller) absence(ctx context.Context, kind, ref string) (view.Absence, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(ref)
	if err != nil || ns == "" {
		return view.Absence{Gone: true}, nil // names no source at all
	}
	return c.opts.View.Confirm(ctx, c.opts.Finder, kind, ns, name)
}

// outOfView says, once per replica, that courier leaves it as it is because
// its source k names is outside courier's view (hidden by what hides).
func (c *Controller) outOfView(k key, r *item, what string) {
	if k.Cluster != "" {
		// Nothing in this cluster to put an Event on: the log says it.
		if c.tellOnce(r.meta.GetUID(), what) {
			c.logger.Info("replica in another cluster left as it is: its source is outside courier's view", zap.Stringer("pair", k), zap.String("hiddenBy", what))
		}
		return
	}
	msg := fmt.Sprintf("the source %s %s is not in courier's view (%s): courier cannot tell whether it still exists, so this replica is left as it is, neither updated nor deleted. Bring the source back into the view, or delete this replica yourself if it is no longer wanted",
		k.Kind, k.sourceRef(), what)
	if !c.tellOnce(r.meta.GetUID(), msg) {
		return
	}
	c.logger.Info("replica left as it is: its source is outside courier's view", zap.Stringer("pair", k), zap.String("hiddenBy", what))
	c.recorder.Event(r.obj, corev1.EventTypeWarning, wellknown.ReasonSourceOutOfView, msg)
}

// heldByFlapping puts k back until the labels of its target namespace have
// held still, if they are flapping (see flapSettle).
func (c *Controller) heldByFlapping(k key, seen time.Time) bool {
	if k.Cluster != "" {
		return false // another cluster's namespaces are not tracked
	}
	wait := c.flapHold(k.Target)
	if wait <= 0 {
		return false
	}
	c.queue.AddAfter(k, wait, seen)
	return true
}

// cannotSpeakFor reports whether courier's cache cannot speak for ref
// ("namespace/name") of o's kind: it holds nothing there, or the namespace
// is not in the view (its cache may be stale). Only then is the view asked
// whether it is gone; an object the cache holds in view is what it says.
func (c *Controller) cannotSpeakFor(o *objects, ref string) (bool, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(ref)
	if err != nil || ns == "" {
		return true, nil
	}
	if c.opts.View.Namespace(ns) != view.Inside {
		return true, nil
	}
	it, err := o.get(ns, name)
	return it == nil, err
}

// isSource reports whether ref ("namespace/name") is a live source of o's kind.
func (c *Controller) isSource(o *objects, ref string) bool {
	ns, name, err := cache.SplitMetaNamespaceKey(ref)
	if err != nil || ns == "" {
		return false
	}
	it, err := o.get(ns, name)
	return err == nil && it != nil && c.isSourceMeta(it.meta)
}

// write runs one API write, counting it and timing it from the source change.
// A failed write is retried with backoff; its key keeps waiting for the same change.
func (c *Controller) write(k key, seen time.Time, op string, do func() error) error {
	if err := do(); err != nil {
		c.queue.Remember(k, seen) // the retry still measures from the original change
		if k.Pull {
			return fmt.Errorf("fill %s %s from its source: %w", k.Kind, k.sourceRef(), err)
		}
		return fmt.Errorf("%s replica of %s %s in namespace %s: %w", op, k.Kind, k.sourceRef(), k.where(), err)
	}
	c.metrics.observeWrite(k, op, c.clock.Now().Sub(seen), !seen.IsZero())
	c.logger.Debug("replica written", zap.Stringer("pair", k), zap.String("op", op))
	return nil
}

func (c *Controller) warn(src *item, reason, msg string) {
	c.recorder.Event(src.obj, corev1.EventTypeWarning, reason, msg)
}

// isQuiet reports errors that resolve once the cache catches up with a write
// that raced ours; they are retried without being logged as failures.
func isQuiet(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) ||
		namespaces.Refused(err) || errors.Is(err, context.Canceled) || errors.Is(err, errUnavailable) || errors.Is(err, errUnreachable)
}

// errUnavailable: the pair's target namespace is watched but courier's
// caches cannot speak for it now (informers.Set.Unavailable); the pair is
// retried with backoff, quietly (courier_watch_namespace_unavailable says
// why).
var errUnavailable = errors.New("the target namespace is unavailable to courier's caches now")

// failed tells the source's owner that its replica in k.Target could not be
// written (a quota, an admission policy, a missing permission): the API's
// answer says why. Repeats of one failure are counted on one Event.
func (c *Controller) failed(k key, err error) {
	src, gerr := c.objects[k.Kind].get(k.Namespace, k.Name)
	if gerr != nil || src == nil {
		return
	}
	c.warn(src, wellknown.ReasonReplicaFailed, fmt.Sprintf(
		"%v. courier retries with backoff; the other replicas are not held up", err))
}
