package informers

import (
	"context"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-k8s/courier/internal/metrics"
)

// Reach is which namespaces of --watch-namespaces courier may list and
// watch in now. With Roles only, a watched namespace that is deleted takes
// courier's Role with it, and one listed before its Role is bound has none
// yet: the API server refuses every list and watch there. Such a namespace
// is left out of what courier waits for (readiness, election: Set.HasSynced,
// Set.WaitForSync) so it holds nothing else up, and out of courier's view
// (package view: nothing there counts as gone); it is picked up again by
// its informers' next attempt that the API server allows
// (courier_watch_namespace_unavailable says which are out now).
type Reach struct {
	logger *zap.Logger
	gauge  *prometheus.GaugeVec
	// served, if set, is called (not under mu) when a namespace is served
	// again after a refusal.
	served func(namespace string)

	mu      sync.Mutex
	refused map[string]map[string]bool // namespace → what is refused there
}

func newReach(namespaces []string, logger *zap.Logger) *Reach {
	r := &Reach{
		logger:  logger,
		refused: map[string]map[string]bool{},
		gauge: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: metrics.Namespace, Name: "watch_namespace_unavailable",
			Help: "1 for a namespace of --watch-namespaces where the API server refuses courier's lists and watches now (deleted, or courier's Role not bound there): courier goes on without it; 0 once it is served.",
		}, []string{"namespace"}),
	}
	for _, ns := range namespaces {
		r.gauge.WithLabelValues(ns).Set(0)
	}
	return r
}

// Gauge is courier_watch_namespace_unavailable, to register.
func (r *Reach) Gauge() *prometheus.GaugeVec { return r.gauge }

// Refused reports whether courier may not list something in namespace ns
// now. A nil Reach (the cluster-wide install) refuses nothing.
func (r *Reach) Refused(ns string) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.refused[ns]) > 0
}

// result records the answer to a request for what in namespace ns:
// refused (Forbidden), or served (nil: the cache is being refilled from
// what the API server sends, see reporting); any other error says nothing
// of courier's permissions.
func (r *Reach) result(ns, what string, err error) {
	if err != nil && !apierrors.IsForbidden(err) {
		return
	}
	r.mu.Lock()
	before := len(r.refused[ns]) > 0
	if err != nil {
		if r.refused[ns] == nil {
			r.refused[ns] = map[string]bool{}
		}
		r.refused[ns][what] = true
	} else {
		delete(r.refused[ns], what)
	}
	after := len(r.refused[ns]) > 0
	kinds := make([]string, 0, len(r.refused[ns]))
	for k := range r.refused[ns] {
		kinds = append(kinds, k)
	}
	r.mu.Unlock()
	if before == after {
		return
	}
	slices.Sort(kinds)
	if after {
		r.gauge.WithLabelValues(ns).Set(1)
		r.logger.Warn("courier may not list or watch in this namespace of --watch-namespaces (deleted, or courier's Role not bound there): it goes on without it, acts on nothing there as gone, and picks it up once allowed; create the namespace and bind courier's Role there, or remove it from the flag",
			zap.String("namespace", ns), zap.Strings("refused", kinds))
		return
	}
	r.gauge.WithLabelValues(ns).Set(0)
	r.logger.Info("a namespace of --watch-namespaces is served again", zap.String("namespace", ns))
	if r.served != nil {
		r.served(ns)
	}
}

// reporting is c, telling report whether the API server serves it: a
// refusal or failure counts at once; being served counts only once the
// cache holds what the API server sent, so a namespace allowed again is not
// taken for in view (package view) while its cache is still the one from
// before the refusal: a plain list counts when the reflector watches after
// it (it has replaced its store by then), a list streamed as a watch
// (WatchList) at the bookmark that ends its initial events.
type reporting[L runtime.Object] struct {
	c      resourceClient[L]
	report func(error)
}

// reportingTo is report for what in namespace ns, told to r.
func (r *Reach) reportingTo(ns, what string) func(error) {
	return func(err error) { r.result(ns, what, err) }
}

func (p reporting[L]) List(ctx context.Context, o metav1.ListOptions) (L, error) {
	l, err := p.c.List(ctx, o)
	if err != nil {
		p.report(err)
	}
	return l, err
}

func (p reporting[L]) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := p.c.Watch(ctx, o)
	if err != nil || o.SendInitialEvents == nil || !*o.SendInitialEvents {
		p.report(err)
		return w, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Bookmark {
			if m, ok := e.Object.(metav1.Object); ok && m.GetAnnotations()[metav1.InitialEventsAnnotationKey] == "true" {
				p.report(nil)
			}
		}
		return e, true
	}), nil
}
