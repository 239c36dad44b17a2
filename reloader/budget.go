package reloader

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/room"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// budget is --reload-max-in-flight: at most max rollouts courier started
// and not yet healthy at any moment, cluster-wide. In flight is read from
// the cache — a workload of a kind a wave waits for (workload.Waits) that
// carries courier.dev/reloaded-at and is not healthy — so every process
// knows it, a new leader at once; the leader adds the rollouts it wrote
// and its cache has not shown yet (reserved). Rollouts that find no slot
// wait, and are let go in order (wave, then namespace/name) as slots free.
type budget struct {
	max   int
	mu    sync.Mutex
	fly   map[key]bool      // in flight, as the cache shows it
	taken map[key]string    // written, not yet in the cache: the courier.dev/config-inputs it was written over
	queue map[key]queuedFor // waiting for a slot
	// peaks: the most entries fly, taken and queue held since each was
	// made (see tidy).
	peaks [3]int
	gauge prometheus.Gauge
}

type queuedFor struct {
	wave int
	seen time.Time
}

func newBudget(max int, reg prometheus.Registerer) *budget {
	b := &budget{max: max, fly: map[key]bool{}, taken: map[key]string{}, queue: map[key]queuedFor{},
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "courier_reload_in_flight",
			Help: "Rollouts courier started that are not healthy yet (Deployments, StatefulSets, DaemonSets, Argo Rollouts carrying courier.dev/reloaded-at), cluster-wide; --reload-max-in-flight bounds it."})}
	reg.MustRegister(b.gauge)
	return b
}

// inFlight reports whether the cached workload obj of kind k.Kind is a
// rollout courier started that is not healthy yet.
func (c *Controller) inFlight(k key, obj any) bool {
	m, ok := obj.(metav1.Object)
	if !ok || !workload.Waits(k.Kind) {
		return false
	}
	_, rolled := m.GetAnnotations()[wellknown.ReloadedAt]
	return rolled && c.healthOf(obj) != workload.Healthy
}

// observe takes in the cached workload k (obj; nil: gone), in flight or
// not, and returns the waiting rollouts a slot is now free for.
func (b *budget) observe(k key, obj any, flying bool) []queued {
	b.mu.Lock()
	defer b.mu.Unlock()
	if obj == nil {
		delete(b.fly, k)
		delete(b.taken, k)
		delete(b.queue, k)
	} else {
		if was, ok := b.taken[k]; ok && obj.(metav1.Object).GetAnnotations()[wellknown.ConfigInputs] != was {
			delete(b.taken, k) // the cache shows the rollout: fly says the rest
		}
		if flying {
			b.fly[k] = true
		} else {
			delete(b.fly, k)
		}
	}
	b.tidy()
	b.gauge.Set(float64(b.count()))
	return b.next()
}

// tidy notes how large each map grew and makes anew one left with little
// of it (room.Kept): a source update rolls out thousands of workloads at
// once, and one of them that never gets healthy must not keep their room.
// b.mu is held.
func (b *budget) tidy() {
	b.fly = room.Kept(b.fly, &b.peaks[0])
	b.taken = room.Kept(b.taken, &b.peaks[1])
	b.queue = room.Kept(b.queue, &b.peaks[2])
}

// queued is a rollout waiting for a slot.
type queued struct {
	key  key
	seen time.Time
}

// count is the rollouts in flight; b.mu is held.
func (b *budget) count() int {
	n := len(b.fly)
	for k := range b.taken {
		if !b.fly[k] {
			n++
		}
	}
	return n
}

// next is the waiting rollouts, in order, that the free slots are for; b.mu
// is held.
func (b *budget) next() []queued {
	free := b.max - b.count()
	if b.max == 0 || free <= 0 || len(b.queue) == 0 {
		return nil
	}
	order := b.ordered()
	var out []queued
	for _, k := range order[:min(free, len(order))] {
		out = append(out, queued{k, b.queue[k].seen})
	}
	return out
}

// ordered is the waiting rollouts in order: wave, then namespace/name.
func (b *budget) ordered() []key {
	keys := make([]key, 0, len(b.queue))
	for k := range b.queue {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y key) int {
		return cmp.Or(cmp.Compare(b.queue[x].wave, b.queue[y].wave), strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name), strings.Compare(x.Kind, y.Kind))
	})
	return keys
}

// room reports whether rollout k (of wave) may start now: it holds a slot
// already (its earlier rollout is not healthy yet), or a slot is free that
// no rollout waiting before it is owed. With take, it also takes the slot
// (recorded against record, the workload's courier.dev/config-inputs now),
// or joins the queue (seen: when its change was first seen).
func (b *budget) room(k key, wave int, seen time.Time, record string, take bool) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.count()
	if b.max == 0 || !workload.Waits(k.Kind) {
		return true
	}
	if _, held := b.taken[k]; held || b.fly[k] {
		return true
	}
	q := queuedFor{wave: max(wave, 0), seen: seen}
	before := 0
	for o, oq := range b.queue {
		if o != k && (oq.wave < q.wave || oq.wave == q.wave && o.Namespace+"/"+o.Name < k.Namespace+"/"+k.Name) {
			before++
		}
	}
	ok := n+before < b.max
	if take {
		if ok {
			delete(b.queue, k)
			b.taken[k] = record
			b.gauge.Set(float64(b.count()))
		} else {
			b.queue[k] = q
		}
		b.tidy()
	}
	return ok
}

// wait queues rollout k (of wave; its change first seen at seen) for a
// slot, and returns the rollouts a slot is free for (it among them, if one
// freed since it was refused).
func (b *budget) wait(k key, wave int, seen time.Time) []queued {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.queue[k] = queuedFor{wave: max(wave, 0), seen: seen}
	b.tidy()
	return b.next()
}

// give back the slot rollout k took: its write failed (or made nothing
// to wait for). It returns the rollouts the slot is now for.
func (b *budget) giveBack(k key) []queued {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.taken, k)
	b.tidy()
	b.gauge.Set(float64(b.count()))
	return b.next()
}

// leave: rollout k no longer waits for a slot (it rolled out, or has
// nothing to roll out).
func (b *budget) leave(k key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.queue, k)
	b.tidy()
}

// forgetKind drops every entry of workloads of kind, and returns their keys.
func (b *budget) forgetKind(kind string) []key {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []key
	for k := range b.fly {
		if k.Kind == kind {
			out = append(out, k)
			delete(b.fly, k)
		}
	}
	for k := range b.taken {
		if k.Kind == kind {
			out = append(out, k)
			delete(b.taken, k)
		}
	}
	for k := range b.queue {
		if k.Kind == kind {
			delete(b.queue, k)
		}
	}
	b.tidy()
	b.gauge.Set(float64(b.count()))
	return out
}

// next0 is next, taking the lock.
func (b *budget) next0() []queued {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next()
}

// reset: the term ended; reservations are the leader's alone.
func (b *budget) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.taken, b.queue = map[key]string{}, map[key]queuedFor{} // new maps: Go maps never shrink
	b.tidy()
	b.gauge.Set(float64(b.count()))
}

// letGo syncs the rollouts a slot is free for.
func (c *Controller) letGo(qs []queued) {
	for _, q := range qs {
		c.queue.Add(q.key, q.seen)
	}
}

// observeBudget takes a workload event into the budget (obj nil: gone).
func (c *Controller) observeBudget(obj any, gone bool) {
	obj = informers.Unwrap(obj)
	k, ok := workloadKey(obj)
	if !ok {
		return
	}
	if gone {
		c.letGo(c.budget.observe(k, nil, false))
		return
	}
	c.letGo(c.budget.observe(k, obj, c.inFlight(k, obj)))
	// A Rollout taking its template from this Deployment is in flight by
	// what the Deployment holds too.
	for _, r := range c.referencing(k) {
		if info, ok := c.kind(r.Kind); ok {
			if ro, ok, _ := info.indexer.GetByKey(r.Namespace + "/" + r.Name); ok {
				c.letGo(c.budget.observe(r, ro, c.inFlight(r, ro)))
			}
		}
	}
}

// forgetKind: the custom kind is no longer reloaded; its workloads wait
// for nothing and hold no slot, and those waiting for them look again.
func (c *Controller) forgetKind(kind string) {
	for _, k := range c.budget.forgetKind(kind) {
		c.wake(k)
	}
	c.letGo(c.budget.next0())
	c.waiting.forgetKind(kind)
}

// budgetGate is the policy of --reload-max-in-flight: a rollout waits while
// as many courier-started rollouts are not healthy yet (or its turn has not
// come: the waiting ones go in order).
func budgetGate(f *facts, d *decision) (verdict, bool) {
	if f.maxInFlight == 0 || f.slot {
		return verdict{}, false
	}
	return verdict{d: d, do: doKeepPending, hold: &hold{slot: true}, skip: skipBudget,
		event: wellknown.ReasonReloadWaiting, eventType: corev1.EventTypeNormal, message: fmt.Sprintf(
			"%s changed: this workload waits for a rollout slot: --reload-max-in-flight=%d rollouts courier started are not healthy yet (courier_reload_in_flight); the waiting ones roll out in order (wave, then namespace/name) as those become healthy",
			strings.Join(d.changed, ", "), f.maxInFlight)}, true
}
