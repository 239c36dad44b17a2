package replicator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/writer"
)

// remoteWriteTimeout bounds one pair's writes into another cluster: a
// cluster that stops answering mid-write holds one worker no longer.
const remoteWriteTimeout = 10 * time.Second

var (
	// errNoCluster: the pair's cluster has no usable cluster Secret (gone,
	// or invalid): nothing can be done there, and nothing is.
	errNoCluster = errors.New("no usable cluster Secret names the cluster")
	// errUnreachable: the pair's cluster does not answer, or its caches
	// are being filled; the pair is retried with backoff, quietly, and
	// again as soon as the cluster is back (courier_cluster_reachable).
	errUnreachable = errors.New("the cluster cannot be reached now")
)

// place is where a pair's replica goes, as courier's caches show it.
type place struct {
	in            *informers.Remote // the cluster; nil: this one
	writer        *writer.Writer
	existing      *item                 // what holds the name there (nil: nothing)
	ns            *namespaces.Namespace // the target namespace (nil: gone)
	sourceCluster string                // what its replica names as its source's cluster
}

// placeOf reads pair k's target from the caches.
func (c *Controller) placeOf(k key, o *objects) (place, error) {
	if k.Cluster != "" {
		return c.remotePlace(k)
	}
	existing, err := o.get(k.Target, k.Name)
	if err != nil {
		return place{}, err
	}
	ns, _ := namespaces.Get(c.namespaces, k.Target)
	if ns != nil && c.opts.View.Namespace(k.Target) != view.Inside {
		return place{}, errUnavailable
	}
	return place{writer: c.writer, existing: existing, ns: ns}, nil
}

func (c *Controller) remotePlace(k key) (place, error) {
	in := c.cluster(k.Cluster)
	if in == nil {
		return place{}, errNoCluster
	}
	if ok, _ := in.Reachable(); !ok {
		return place{}, errUnreachable
	}
	pl := place{in: in, writer: writer.New(in.Client, nil), sourceCluster: c.opts.ClusterName}
	obj, ok, err := remoteObjects(in, k.Kind).GetStore().GetByKey(k.Target + "/" + k.Name)
	if err != nil {
		return place{}, err
	}
	if ok {
		pl.existing = itemOf(obj)
	}
	pl.ns, _ = namespaces.Get(in.Namespaces.GetStore(), k.Target)
	return pl, nil
}

// cluster is the usable cluster named name (nil: none).
func (c *Controller) cluster(name string) *informers.Remote {
	if c.opts.Clusters == nil {
		return nil
	}
	return c.opts.Clusters.Get(name)
}

func remoteObjects(in *informers.Remote, kind string) cache.SharedIndexInformer {
	if kind == kindSecret {
		return in.Secrets
	}
	return in.ConfigMaps
}

// takenInCluster handles a replica's create in another cluster that found
// the name taken by an object its cache does not hold (the cache holds
// courier's replicas only): it reads that object by name and plans again
// with it. Courier's own replica (its label stripped, say) is reverted; an
// object courier did not create is reported and left untouched, and the
// pair retries with backoff, for courier would not see it go.
func (c *Controller) takenInCluster(ctx context.Context, k key, seen time.Time, o *objects, src *item, pl place, created error) error {
	var obj runtime.Object
	var err error
	if k.Kind == kindSecret {
		obj, err = pl.in.Client.CoreV1().Secrets(k.Target).Get(ctx, k.Name, metav1.GetOptions{})
	} else {
		obj, err = pl.in.Client.CoreV1().ConfigMaps(k.Target).Get(ctx, k.Name, metav1.GetOptions{})
	}
	if err != nil {
		return err // gone since, or unreadable: retried with backoff
	}
	pl.existing = itemOf(obj)
	f, err := c.pairFacts(ctx, k, o, src, pl)
	if err != nil {
		return err
	}
	p := planPair(f)
	switch p.action {
	case conflict:
		c.conflict(k, src, p.reason)
		return created
	case update, recreate:
		return c.writePair(ctx, k, seen, o, src, pl, f, p)
	}
	return created
}

// fanOutToClusters enqueues source k's pairs in every cluster its
// courier.dev/replicate-to-clusters selects: each namespace there its
// replicate-to selects.
func (c *Controller) fanOutToClusters(k key, f *facts, seen time.Time) {
	if c.opts.Clusters == nil || f.clusters == nil || f.clustersErr != nil {
		return
	}
	for _, in := range c.opts.Clusters.List() {
		if !in.Selected(f.clusters) || c.opts.Clusters.Shadowed(in) != "" {
			continue
		}
		if ok, _ := in.Reachable(); !ok {
			continue // enqueued again when it is back (syncCluster)
		}
		for _, obj := range in.Namespaces.GetStore().List() {
			if ns, ok := namespaces.Of(obj); ok && f.targets.Matches(ns) {
				c.enqueue(key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Target: ns.GetName(), Cluster: in.Name}, seen)
			}
		}
	}
}

// enqueueRemoteReplicas enqueues the pair of every replica of source k in
// every reachable cluster: each one checks whether it is still wanted.
func (c *Controller) enqueueRemoteReplicas(k key, seen time.Time) {
	if c.opts.Clusters == nil {
		return
	}
	for _, in := range c.opts.Clusters.List() {
		if ok, _ := in.Reachable(); !ok {
			continue
		}
		objs, _ := remoteObjects(in, k.Kind).GetIndexer().ByIndex(informers.ReplicasBySource, k.sourceRef())
		for _, obj := range objs {
			if m, err := meta.Accessor(obj); err == nil && c.wroteInto(m, in.Name) {
				c.enqueue(key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Target: m.GetNamespace(), Cluster: in.Name}, seen)
			}
		}
	}
}

// wroteInto reports whether m, in the cluster named cluster, was written
// there by this cluster's courier through that cluster Secret (one made by
// another cluster's courier, or through another cluster Secret reaching
// the same cluster, is not this one's to sync).
func (c *Controller) wroteInto(m metav1.Object, cluster string) bool {
	v, ok := objmeta.Annotation(m, wellknown.SourceCluster)
	t, _ := objmeta.Annotation(m, wellknown.TargetCluster)
	return ok && v == c.opts.ClusterName && t == cluster
}

// RemoteObject is told of a replica added, changed or deleted in cluster
// (informers.RemoteHandler): its pair, and the pairs of the sources of its
// name that want a replica where it is, look again.
func (c *Controller) RemoteObject(cluster, kind string, m metav1.Object) {
	now := c.clock.Now()
	ns := m.GetNamespace()
	if src, ok := objmeta.Annotation(m, wellknown.Source); ok && c.wroteInto(m, cluster) {
		if srcNS, name, err := cache.SplitMetaNamespaceKey(src); err == nil && srcNS != "" {
			c.enqueue(key{Kind: kind, Namespace: srcNS, Name: name, Target: ns, Cluster: cluster}, now)
		}
	}
	c.enqueueSourcesNamedIn(kind, m.GetName(), cluster, ns, now)
}

// RemoteNamespace is told of a namespace of cluster added, relabelled,
// terminating or deleted: every source that replicates across clusters
// looks at it again.
func (c *Controller) RemoteNamespace(cluster, ns string) {
	now := c.clock.Now()
	for kind, o := range c.objects {
		for _, name := range o.indexer.ListIndexFuncValues(informers.SourcesByName) {
			c.enqueueSourcesNamedIn(kind, name, cluster, ns, now)
		}
	}
}

// ClusterChanged is told of a cluster added, removed, relabelled, or whose
// reachability turned: syncCluster says so and looks again at everything
// that could have a replica there.
func (c *Controller) ClusterChanged(cluster string) {
	c.enqueue(key{Cluster: cluster}, c.clock.Now())
}

// ClusterSecretDeleted forgets what was told of the cluster Secret of uid
// (informers.RemoteHandler), as what is told of any object goes with it.
func (c *Controller) ClusterSecretDeleted(uid types.UID) { c.forgetTold(uid) }

// enqueueSourcesNamedIn enqueues the pair (source, ns in cluster) of every
// source of kind called name that replicates across clusters.
func (c *Controller) enqueueSourcesNamedIn(kind, name, cluster, ns string, seen time.Time) {
	srcs, err := c.objects[kind].byIndex(informers.SourcesByName, name)
	if err != nil {
		return
	}
	for _, s := range srcs {
		if _, ok := objmeta.Annotation(s.meta, wellknown.ReplicateToClusters); ok {
			c.enqueue(key{Kind: kind, Namespace: s.meta.GetNamespace(), Name: name, Target: ns, Cluster: cluster}, seen)
		}
	}
}

// syncCluster tells, once, what is wrong with a cluster's Secret or why
// the cluster cannot be reached (and when it is back), then looks again at
// every source that replicates across clusters and every replica courier
// holds there: what changed meanwhile is written once.
func (c *Controller) syncCluster(k key) error {
	c.queue.Take(k)
	if c.opts.Clusters == nil {
		return nil
	}
	for _, in := range c.opts.Clusters.List() {
		if in.Name == k.Cluster {
			c.tellCluster(in)
		}
	}
	now := c.clock.Now()
	for kind, o := range c.objects {
		for _, name := range o.indexer.ListIndexFuncValues(informers.SourcesByName) {
			srcs, _ := o.byIndex(informers.SourcesByName, name)
			for _, s := range srcs {
				if _, ok := objmeta.Annotation(s.meta, wellknown.ReplicateToClusters); ok {
					c.enqueue(key{Kind: kind, Namespace: s.meta.GetNamespace(), Name: name}, now)
				}
			}
		}
	}
	in := c.cluster(k.Cluster)
	if in == nil {
		c.states.forgetCluster(k.Cluster) // its pairs forget theirs as they come; none may be left
		c.metrics.forgetCluster(k.Cluster)
		return nil
	}
	c.metrics.zeroCluster(k.Cluster)
	if ok, _ := in.Reachable(); !ok {
		return nil
	}
	for _, kind := range []string{kindSecret, kindConfigMap} {
		idx := remoteObjects(in, kind).GetIndexer()
		for _, ref := range idx.ListIndexFuncValues(informers.ReplicasBySource) {
			srcNS, name, err := cache.SplitMetaNamespaceKey(ref)
			if err != nil || srcNS == "" {
				continue
			}
			objs, _ := idx.ByIndex(informers.ReplicasBySource, ref)
			for _, obj := range objs {
				if m, err := meta.Accessor(obj); err == nil && c.wroteInto(m, in.Name) {
					c.enqueue(key{Kind: kind, Namespace: srcNS, Name: name, Target: m.GetNamespace(), Cluster: in.Name}, now)
				}
			}
		}
	}
	return nil
}

// tellCluster says on its cluster Secret what is wrong with it, once per
// cause, and when a cluster said unreachable answers again.
func (c *Controller) tellCluster(in *informers.Remote) {
	obj := in.SecretObject()
	uid := obj.UID
	problem := in.Invalid
	if older := c.opts.Clusters.Shadowed(in); older != "" {
		problem = fmt.Sprintf("the cluster name %q is already given by the cluster Secret %s, which is older; give this one another %s", in.Name, older, wellknown.Cluster)
	}
	if problem != "" {
		msg := fmt.Sprintf("the cluster Secret %s/%s cannot be used: %s. Nothing is replicated through it until it is fixed; other clusters are not held up",
			obj.Namespace, obj.Name, problem)
		if c.tellOnce(uid, msg) {
			c.recorder.Event(obj, corev1.EventTypeWarning, wellknown.ReasonClusterInvalid, msg)
		}
		return
	}
	ok, why := in.Reachable()
	switch {
	case ok:
		c.mu.Lock()
		was := c.told[uid]
		c.mu.Unlock()
		if was != "" && was != clusterReachable && c.tellOnce(uid, clusterReachable) {
			c.recorder.Event(obj, corev1.EventTypeNormal, wellknown.ReasonClusterReachable,
				fmt.Sprintf("the cluster %s answers again; what changed meanwhile is written there once", in.Name))
		}
	case in.Failing():
		msg := fmt.Sprintf("the cluster %s cannot be reached: %s. courier retries with backoff and deletes nothing meanwhile, there or here; check the kubeconfig's server and credentials, and that the RBAC of manifests/remote-cluster is bound there", in.Name, why)
		if c.tellOnce(uid, msg) {
			c.logger.Warn("cluster unreachable", zap.String("cluster", in.Name), zap.String("why", why))
			c.recorder.Event(obj, corev1.EventTypeWarning, wellknown.ReasonClusterUnreachable, msg)
		}
	}
}

// clusterReachable is what is last told of a cluster that answers again.
const clusterReachable = "reachable"

// resyncClusters starts a term's look at every cluster (syncCluster).
func (c *Controller) resyncClusters() {
	if c.opts.Clusters == nil {
		return
	}
	for _, in := range c.opts.Clusters.List() {
		c.enqueue(key{Cluster: in.Name}, time.Time{})
	}
}
