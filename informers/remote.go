package informers

import (
	"context"
	"fmt"
	"maps"
	"sort"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/clusters"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/metrics"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// RemoteSelector is the label selector of every list and watch of Secrets
// and ConfigMaps in a cluster courier replicates into: its replicas only.
// Nothing else there is ever listed, so nothing else is cached, and absence
// from that cache is never taken for "gone" (a replica stripped of the label
// is found again by name when courier writes it).
var RemoteSelector = wellknown.Replica + "=true"

// Remotes is the clusters courier replicates into (docs/clusters.md): one
// for each Secret in courier's namespace labelled courier.dev/cluster, each
// with three small caches of its own (namespaces, and courier's replicas
// among Secrets and ConfigMaps, RemoteSelector). Every process runs them,
// leader or not, so a standby that takes over finds them warm.
type Remotes struct {
	secrets cache.SharedIndexInformer // the cluster Secrets
	logger  *zap.Logger
	gauge   *prometheus.GaugeVec
	// newClient builds a cluster's client (a test may stand in).
	newClient func(*rest.Config) (kubernetes.Interface, error)
	qps       float32 // each cluster's client-side limit (--kube-api-qps)
	burst     int

	mu      sync.Mutex
	ctx     context.Context    // Start's
	byKey   map[string]*Remote // by cluster Secret, "namespace/name"
	handler RemoteHandler
}

// RemoteHandler is told what happens in the clusters (the replicator).
// Calls come from informer goroutines; they must not block.
type RemoteHandler interface {
	// RemoteObject: a replica of kind (wellknown.KindSecret or KindConfigMap)
	// in cluster was added, changed or deleted.
	RemoteObject(cluster, kind string, obj metav1.Object)
	// RemoteNamespace: a namespace of cluster was added, relabelled,
	// began terminating or was deleted.
	RemoteNamespace(cluster, namespace string)
	// ClusterChanged: cluster was added, removed, relabelled, or became
	// reachable or unreachable.
	ClusterChanged(cluster string)
	// ClusterSecretDeleted: the cluster Secret of uid is gone (or no longer
	// labelled): what was kept of it goes too.
	ClusterSecretDeleted(uid types.UID)
}

// Remote is one cluster courier replicates into: what one cluster Secret
// says. Its fields are set before it is published and never change; what
// changes (the Secret's labels, reachability) is read through its methods.
type Remote struct {
	// Name is its courier.dev/cluster label.
	Name string
	// Invalid, if set, says why the Secret cannot be used: nothing else
	// below is set.
	Invalid string
	// Client writes in the cluster.
	Client kubernetes.Interface
	// Secrets, ConfigMaps (courier's replicas only) and Namespaces are its
	// caches.
	Secrets, ConfigMaps, Namespaces cache.SharedIndexInformer

	key     string // its cluster Secret's namespace/name
	config  string // the kubeconfig's digest: a new one starts over
	cancel  context.CancelFunc
	mu      sync.Mutex
	secret  *corev1.Secret   // the cluster Secret, its values left out (replaced whole, never changed)
	refused map[string]error // what fails now, by informer
	filled  bool             // every cache has listed once
}

// SecretObject is the cluster Secret without its values: what Events are
// recorded on.
func (c *Remote) SecretObject() *corev1.Secret {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.secret
}

// Selected reports whether sel (a source's replicate-to-clusters) selects
// the cluster by its Secret's labels.
func (c *Remote) Selected(sel labels.Selector) bool {
	if c.Invalid != "" {
		return false
	}
	return sel.Matches(labels.Set(c.SecretObject().Labels))
}

// NewRemotes watches the Secrets of courier's namespace labelled
// courier.dev/cluster through client; each cluster's client is limited to
// qps requests a second (burst above it), as courier's own is. Nothing
// starts until Start.
func NewRemotes(client kubernetes.Interface, namespace string, qps float32, burst int, logger *zap.Logger) *Remotes {
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = wellknown.Cluster
			return client.CoreV1().Secrets(namespace).List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = wellknown.Cluster
			return client.CoreV1().Secrets(namespace).Watch(ctx, o)
		},
	}
	r := &Remotes{
		secrets:   cache.NewSharedIndexInformerWithOptions(lw, &corev1.Secret{}, cache.SharedIndexInformerOptions{ObjectDescription: "cluster Secret"}),
		logger:    logger.Named("clusters"),
		newClient: func(c *rest.Config) (kubernetes.Interface, error) { return kubernetes.NewForConfig(c) },
		qps:       qps,
		burst:     burst,
		byKey:     map[string]*Remote{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "cluster_reachable",
			Help: "1 for a cluster courier replicates into (a cluster Secret) whose API server answers and whose caches are filled; 0 while it cannot be reached, refuses courier, or its Secret is invalid.",
		}, []string{"cluster"}),
	}
	_, _ = r.secrets.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.apply(obj) },
		UpdateFunc: func(_, obj any) { r.apply(obj) },
		DeleteFunc: func(obj any) {
			if s, ok := Unwrap(obj).(*corev1.Secret); ok {
				r.remove(s.Namespace + "/" + s.Name)
				if r.handler != nil {
					r.handler.ClusterSecretDeleted(s.UID)
				}
			}
		},
	})
	return r
}

// Gauge is courier_cluster_reachable, to register.
func (r *Remotes) Gauge() *prometheus.GaugeVec { return r.gauge }

// Handle registers the one handler told of the clusters; call it before Start.
func (r *Remotes) Handle(h RemoteHandler) { r.handler = h }

// Start runs the cluster Secrets' informer, and each cluster's caches, until ctx ends.
func (r *Remotes) Start(ctx context.Context) {
	r.mu.Lock()
	r.ctx = ctx
	r.mu.Unlock()
	go r.secrets.RunWithContext(ctx)
}

// Get is the cluster named name (nil: none, or its Secret is invalid).
// When several cluster Secrets give one name, the oldest usable one is it.
func (r *Remotes) Get(name string) *Remote {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active(name)
}

// active is Get, under r.mu.
func (r *Remotes) active(name string) *Remote {
	var first *Remote
	for _, c := range r.byKey {
		if c.Name == name && c.Invalid == "" && (first == nil || older(c, first)) {
			first = c
		}
	}
	return first
}

// older orders cluster Secrets by creation, then by namespace/name.
func older(a, b *Remote) bool {
	t, u := a.secret.CreationTimestamp, b.secret.CreationTimestamp
	return t.Before(&u) || t.Equal(&u) && a.key < b.key
}

// Shadowed returns the older cluster Secret that gives c's name to another
// cluster ("" when c is the one Get returns, or is invalid).
func (r *Remotes) Shadowed(c *Remote) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.active(c.Name); a != nil && a != c && c.Invalid == "" {
		return a.key
	}
	return ""
}

// List is every cluster Secret's cluster, by name, invalid ones included.
func (r *Remotes) List() []*Remote {
	r.mu.Lock()
	out := make([]*Remote, 0, len(r.byKey))
	for _, c := range r.byKey {
		out = append(out, c)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		return out[i].Name < out[j].Name || out[i].Name == out[j].Name && out[i].key < out[j].key
	})
	return out
}

// Reachable reports whether the cluster answers and its caches are filled:
// only then are its pairs synced. Why not, if not.
func (c *Remote) Reachable() (bool, string) {
	if c.Invalid != "" {
		return false, c.Invalid
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, what := range []string{"namespaces", "Secrets", "ConfigMaps"} {
		if err := c.refused[what]; err != nil {
			return false, fmt.Sprintf("listing or watching its %s fails: %v", what, err)
		}
	}
	if !c.filled {
		return false, "its caches are being filled"
	}
	return true, ""
}

// Failing reports whether a list or watch of the cluster fails now (not
// merely its caches being filled).
func (c *Remote) Failing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.refused) > 0
}

// apply builds, rebuilds or relabels the cluster of a cluster Secret.
func (r *Remotes) apply(obj any) {
	s, ok := obj.(*corev1.Secret)
	if !ok {
		return
	}
	key := s.Namespace + "/" + s.Name
	name, _ := clusters.NameOf(s)
	digest := content.Hash(content.Entries(s))
	shown := &corev1.Secret{TypeMeta: metav1.TypeMeta{Kind: "Secret", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{
		Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion, Labels: maps.Clone(s.Labels), CreationTimestamp: s.CreationTimestamp}}

	r.mu.Lock()
	old := r.byKey[key]
	if old != nil && old.Name == name && old.config == digest && old.Invalid == "" {
		// Relabelled only: the caches stay.
		old.mu.Lock()
		old.secret = shown
		old.mu.Unlock()
		r.mu.Unlock()
		r.changed(name)
		return
	}
	if old != nil && old.cancel != nil {
		old.cancel()
	}
	c := &Remote{Name: name, key: key, secret: shown, config: digest, refused: map[string]error{}}
	if cfg, err := clusters.Config(s); err != nil {
		c.Invalid = err.Error()
	} else if err := r.build(c, cfg); err != nil {
		c.Invalid = "its kubeconfig cannot be used: " + clusters.Sanitize(err).Error()
	}
	r.byKey[key] = c
	ctx := r.ctx
	r.mu.Unlock()
	if old != nil && old.Name != name {
		r.gaugeOf(old.Name)
		r.changed(old.Name)
	}
	if c.Invalid != "" {
		r.logger.Warn("cluster Secret cannot be used; nothing is replicated into its cluster until it is fixed",
			zap.String("secret", key), zap.String("cluster", name), zap.String("problem", c.Invalid))
	} else if ctx != nil {
		r.run(ctx, c)
	}
	r.gaugeOf(name)
	r.changed(name)
}

// gaugeOf sets courier_cluster_reachable for the cluster name from what
// Get gives now (none: the series goes).
func (r *Remotes) gaugeOf(name string) {
	c := r.Get(name)
	if c == nil {
		r.gauge.DeleteLabelValues(name)
		return
	}
	if ok, _ := c.Reachable(); ok {
		r.gauge.WithLabelValues(name).Set(1)
	} else {
		r.gauge.WithLabelValues(name).Set(0)
	}
}

// build makes the cluster's client and caches.
func (r *Remotes) build(c *Remote, cfg *rest.Config) error {
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = wellknown.FieldManager
	cfg.QPS, cfg.Burst = r.qps, r.burst
	client, err := r.newClient(cfg)
	if err != nil {
		return err
	}
	c.Client = client
	report := func(what string) func(error) {
		return func(err error) { r.result(c, what, err) }
	}
	selected := func(o *metav1.ListOptions) { o.LabelSelector = RemoteSelector }
	c.Secrets = informerOf[*corev1.SecretList](reporting[*corev1.SecretList]{client.CoreV1().Secrets(""), report("Secrets")}, client, &corev1.Secret{}, "", selected, cache.Indexers{ReplicasBySource: indexReplicasBySource})
	c.ConfigMaps = informerOf[*corev1.ConfigMapList](reporting[*corev1.ConfigMapList]{client.CoreV1().ConfigMaps(""), report("ConfigMaps")}, client, &corev1.ConfigMap{}, "", selected, cache.Indexers{ReplicasBySource: indexReplicasBySource})
	c.Namespaces = informerOf[*corev1.NamespaceList](reporting[*corev1.NamespaceList]{client.CoreV1().Namespaces(), report("namespaces")}, client, &corev1.Namespace{}, "", nil, cache.Indexers{})
	// Replicas hold the values of sources courier already holds: their
	// digests are enough (content.Digested), as for every object courier
	// does not copy from.
	digest := Transform(func(metav1.Object, corev1.SecretType) role.Keep { return role.Digests }, nil)
	for _, inf := range []cache.SharedIndexInformer{c.Secrets, c.ConfigMaps, c.Namespaces} {
		if err := inf.SetTransform(digest); err != nil {
			return err
		}
	}
	for kind, inf := range map[string]cache.SharedIndexInformer{wellknown.KindSecret: c.Secrets, wellknown.KindConfigMap: c.ConfigMaps} {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { r.object(c, kind, obj) },
			UpdateFunc: func(_, obj any) { r.object(c, kind, obj) },
			DeleteFunc: func(obj any) { r.object(c, kind, Unwrap(obj)) },
		})
	}
	namespace := func(obj any) {
		if m, err := metaOf(obj); err == nil && r.handler != nil {
			r.handler.RemoteNamespace(c.Name, m.GetName())
		}
	}
	_, _ = c.Namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    namespace,
		UpdateFunc: func(_, obj any) { namespace(obj) },
		DeleteFunc: namespace,
	})
	return nil
}

func (r *Remotes) object(c *Remote, kind string, obj any) {
	if m, err := metaOf(obj); err == nil && r.handler != nil {
		r.handler.RemoteObject(c.Name, kind, m)
	}
}

// run starts the cluster's caches; once they are filled, the cluster is reachable.
func (r *Remotes) run(ctx context.Context, c *Remote) {
	ctx, c.cancel = context.WithCancel(ctx)
	for _, inf := range []cache.SharedIndexInformer{c.Secrets, c.ConfigMaps, c.Namespaces} {
		go inf.RunWithContext(ctx)
	}
	go func() {
		if cache.WaitForCacheSync(ctx.Done(), c.Secrets.HasSynced, c.ConfigMaps.HasSynced, c.Namespaces.HasSynced) {
			r.result(c, "", nil)
		}
	}()
}

// result records the answer to a list or watch of what in cluster c
// (what "": its caches are filled), and says when c's reachability turns.
func (r *Remotes) result(c *Remote, what string, err error) {
	r.mu.Lock()
	current := r.byKey[c.key] == c
	r.mu.Unlock()
	if !current {
		return // its Secret changed or went: a late answer to the old caches
	}
	before, _ := c.Reachable()
	c.mu.Lock()
	switch {
	case what == "":
		c.filled = true
	case err != nil:
		c.refused[what] = err
	default:
		delete(c.refused, what)
	}
	c.mu.Unlock()
	after, why := c.Reachable()
	if before == after {
		return
	}
	r.gaugeOf(c.Name)
	if after {
		r.logger.Info("cluster reachable; its replicas are brought up to date", zap.String("cluster", c.Name))
	} else {
		r.logger.Warn("cluster unreachable; courier retries with backoff and deletes nothing meanwhile", zap.String("cluster", c.Name), zap.String("why", why))
	}
	r.changed(c.Name)
}

func (r *Remotes) remove(key string) {
	r.mu.Lock()
	c := r.byKey[key]
	delete(r.byKey, key)
	r.mu.Unlock()
	if c == nil {
		return
	}
	if c.cancel != nil {
		c.cancel()
	}
	r.gaugeOf(c.Name)
	r.logger.Info("cluster Secret deleted: courier no longer replicates into its cluster, and leaves what it wrote there as it is", zap.String("secret", key), zap.String("cluster", c.Name))
	r.changed(c.Name)
}

func (r *Remotes) changed(name string) {
	if r.handler != nil {
		r.handler.ClusterChanged(name)
	}
}
