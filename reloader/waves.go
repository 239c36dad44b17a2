package reloader

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Rollout waves (docs/reload.md): a workload annotated
// courier.dev/reload-wave: "N" rolls out for a change of an input only once
// every workload of an earlier wave consuming the same content (the same
// input, or any copy of the same source, in any namespace) is done with it:
// rolled out (or not to roll out) and healthy on its new pod template. What
// a wave waits for is read from the objects each time (baselines,
// courier.dev/reloaded-at, status), so a restart or a new leader waits for
// the same workloads; the only per-process state is who waits (to wake
// them) and what was told.

// lastWave is the highest wave; an invalid courier.dev/reload-wave counts
// as it, so a typo never rolls a workload out early.
const lastWave = 9

// noWave: under --compat=reloader, a workload without the annotation is in
// no wave: it neither waits nor holds a later wave back, as with Reloader.
const noWave = -1

// waveOf is the wave of a workload with annotations a.
func waveOf(a map[string]string, compat bool) (int, error) {
	v, ok := a[wellknown.ReloadWave]
	switch {
	case !ok && compat:
		return noWave, nil
	case !ok:
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > lastWave || strconv.Itoa(n) != v {
		return lastWave, fmt.Errorf("%s=%q is not a wave from 0 to %d, so this workload rolls out in the last wave, %d, after every other; give it a number from 0 to %d",
			wellknown.ReloadWave, v, lastWave, lastWave, lastWave)
	}
	return n, nil
}

// ahead is a workload of an earlier wave, consuming what changed, that a
// later wave waits for.
type ahead struct {
	input string // the waiting workload's input (an inputs ID) they share
	key   key
	wave  int
	// pending: its own rollout for the change is still to come (its
	// debounce, its minimum interval, its own wave, the replicator); else
	// it took the change in and health is what its status says of it.
	// heldBy: what holds that rollout back for now ("": nothing), the
	// policy that decided (its minimum interval, a storm).
	pending bool
	heldBy  string
	health  workload.Health
	// since: when courier last rolled it out (courier.dev/reloaded-at;
	// zero: never), from which --reload-wave-timeout runs.
	since time.Time
}

func (a ahead) String() string {
	switch {
	case a.heldBy != "":
		return fmt.Sprintf("%s (wave %d, held back: %s)", a.key, a.wave, a.heldBy)
	case a.pending:
		return fmt.Sprintf("%s (wave %d, not rolled out yet)", a.key, a.wave)
	case a.health == workload.Failed:
		return fmt.Sprintf("%s (wave %d, its rollout failed)", a.key, a.wave)
	}
	return fmt.Sprintf("%s (wave %d, rolling out)", a.key, a.wave)
}

// gatherWaves reads, for a workload whose inputs changed (changed: their
// IDs), the workloads of earlier waves it waits for.
func (c *Controller) gatherWaves(ctx context.Context, f *facts, changed []string) error {
	seen := map[types.UID]bool{f.w.GetUID(): true}
	if f.via != nil {
		seen[f.via.GetUID()] = true
	}
	for _, id := range changed {
		ref := inputs.RefOf(id)
		if ref.Kind != wellknown.KindSecret && ref.Kind != wellknown.KindConfigMap {
			continue // a CSI class is one namespace's
		}
		for _, in := range c.family(ref.Kind, f.key.Namespace, ref.Name) {
			for kind, info := range c.kindList() {
				if !workload.Waits(kind) {
					continue
				}
				objs, err := info.indexer.ByIndex(informers.ConsumersByInput, in)
				if err != nil {
					return err
				}
				for _, o := range objs {
					m := o.(metav1.Object)
					k := key{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName()}
					if refs := c.referencing(k); len(refs) > 0 {
						// Argo Rollouts take its template: they are what rolls out.
						for _, r := range refs {
							if info, ok := c.kind(r.Kind); ok {
								if ro, ok, _ := info.indexer.GetByKey(r.Namespace + "/" + r.Name); ok {
									if err := c.consider(ctx, f, seen, r, ro, id, in); err != nil {
										return err
									}
								}
							}
						}
						continue
					}
					if err := c.consider(ctx, f, seen, k, o, id, in); err != nil {
						return err
					}
				}
			}
		}
	}
	slices.SortFunc(f.ahead, func(a, b ahead) int {
		return cmp.Or(cmp.Compare(a.wave, b.wave), strings.Compare(a.key.String(), b.key.String()))
	})
	return nil
}

// consider adds workload k (cached as obj), a consumer of input (an
// InputKey; id: the waiting workload's input it stands for), to f.ahead
// when it is of an earlier wave and not done with the change.
func (c *Controller) consider(ctx context.Context, f *facts, seen map[types.UID]bool, k key, obj any, id, input string) error {
	m := obj.(metav1.Object)
	if seen[m.GetUID()] {
		return nil
	}
	seen[m.GetUID()] = true
	wave, _ := waveOf(m.GetAnnotations(), c.opts.Compat)
	if wave == noWave || wave >= f.wave {
		return nil
	}
	a, counts, err := c.progress(ctx, k, obj, input)
	if err != nil {
		return err
	}
	if counts && (a.pending || a.health != workload.Healthy) {
		a.input, a.wave = id, wave
		f.ahead = append(f.ahead, a)
	}
	return nil
}

// progress is where workload k (cached as obj) stands with the content of
// input (an InputKey) it consumes now: its own decision, made as sync would
// make it but without waves (its own earlier waves make it pending all the
// same), says whether a rollout is still to come. It does not count (false)
// when it is not courier's to roll out for that input: not opted in to it,
// notify only, another installation's, its template reloaded through an
// Argo Rollout.
func (c *Controller) progress(ctx context.Context, k key, obj any, input string) (ahead, bool, error) {
	a := ahead{key: k, health: workload.HealthOf(obj)}
	if at, err := time.Parse(time.RFC3339, obj.(metav1.Object).GetAnnotations()[wellknown.ReloadedAt]); err == nil {
		a.since = at
	}
	f, err := c.gather(ctx, k, time.Time{}, false)
	if f == nil || err != nil {
		return a, false, err
	}
	v := verdictOf(f)
	switch v.do {
	case doFail, doRetry, doPark:
		a.pending = true // not known yet: wait for it
		return a, true, nil
	}
	if f.otherInstallation || f.rolloutOwned || f.notifyMode || f.observed.notifyOnly || !optsIn(f.observed.optional, k.Namespace, input) {
		return a, false, nil
	}
	switch v.do {
	case doKeepPending:
		a.heldBy = v.policy
		a.pending = true
	case doRollOut, doWait:
		a.pending = true
	}
	return a, true, nil
}

// optsIn reports whether optional, a workload's opted-in inputs (in
// namespace), holds input (an InputKey).
func optsIn(optional map[string]bool, namespace, input string) bool {
	for id := range optional {
		if r := inputs.RefOf(id); informers.InputKey(r.Kind, namespace, r.Name) == input {
			return true
		}
	}
	return false
}

// family is the input kind namespace/name and every object holding the same
// content by replication, as InputKeys: its source and the source's
// replicas, or its own replicas.
func (c *Controller) family(kind, namespace, name string) []string {
	out := []string{informers.InputKey(kind, namespace, name)}
	m, ok := c.object(kind, namespace, name).(metav1.Object)
	if !ok {
		return out
	}
	source := namespace + "/" + name
	if s, _ := objmeta.Annotation(m, wellknown.Source); s != "" {
		source = s
		if ns, n, err := cache.SplitMetaNamespaceKey(s); err == nil && ns != "" {
			out = append(out, informers.InputKey(kind, ns, n))
		}
	}
	idx := c.secrets
	if kind == wellknown.KindConfigMap {
		idx = c.configMaps
	}
	replicas, _ := idx.ByIndex(informers.ReplicasBySource, source)
	for _, r := range replicas {
		rm := r.(metav1.Object)
		if ik := informers.InputKey(kind, rm.GetNamespace(), rm.GetName()); ik != out[0] {
			out = append(out, ik)
		}
	}
	return out
}

// waveGate is the policy of rollout waves: a workload whose change has
// earlier waves still ahead waits; one of them failed, or not healthy
// within --reload-wave-timeout of its rollout, halts the change here.
func waveGate(f *facts, d *decision) (verdict, bool) {
	var ahead []ahead
	for _, a := range f.ahead {
		if slices.Contains(d.changed, a.input) {
			ahead = append(ahead, a)
		}
	}
	if len(ahead) == 0 {
		return verdict{}, false
	}
	v := verdict{d: d, do: doKeepPending, hold: &hold{}}
	var next time.Time
	for _, a := range ahead {
		v.hold.on = append(v.hold.on, a.key)
		v.hold.heldBack = v.hold.heldBack || a.heldBy != ""
		since := a.since
		if since.IsZero() {
			since = f.waitingSince // courier never rolled it out: from when this one began to wait
		}
		deadline := since.Add(f.waveTimeout)
		switch {
		case a.pending:
		case a.health == workload.Failed, !f.now.Before(deadline):
			v.hold.halts = append(v.hold.halts, halt{input: a.input, by: a})
		case next.IsZero() || deadline.Before(next):
			next = deadline
		}
	}
	changed := strings.Join(d.changed, ", ")
	if h := v.hold.halts; len(h) > 0 {
		why := "its rollout failed"
		if h[0].by.health != workload.Failed {
			why = fmt.Sprintf("it is not healthy %s after courier rolled it out (--reload-wave-timeout)", f.waveTimeout)
		}
		v.skip, v.event, v.eventType = skipHalted, wellknown.ReasonReloadHalted, corev1.EventTypeWarning
		v.message = fmt.Sprintf("%s changed, but this workload (wave %d) is held: the change is halted because %s, of wave %d, is not healthy: %s. Fix it or roll it back: once it is healthy the later waves go on by themselves; or change %s again, and the new content starts again at wave 0",
			changed, f.wave, h[0].by.key, h[0].by.wave, why, changed)
		v.inputMessage = fmt.Sprintf("the rollout of this change is halted at wave %d: %s consumes it and is not healthy (%s), so the workloads of later waves that consume it wait. Fix or roll back that workload and they go on by themselves; or change this object again, and the new content starts again at wave 0",
			h[0].by.wave, h[0].by.key, why)
		return v, true
	}
	v.skip, v.event, v.eventType = skipWave, wellknown.ReasonReloadWaiting, corev1.EventTypeNormal
	v.message = fmt.Sprintf("%s changed: this workload (wave %d) rolls out once the earlier waves are healthy on it; waiting for %s",
		changed, f.wave, listed(ahead))
	if !next.IsZero() {
		v.after = next.Sub(f.now) + 100*time.Millisecond // then the wave is halted, unless it was woken before
	}
	return v, true
}

// listed names up to three workloads a wave waits for, those held back
// first (they hold it longest), and how many more.
func listed(as []ahead) string {
	as = slices.Clone(as)
	slices.SortStableFunc(as, func(a, b ahead) int {
		switch {
		case a.heldBy != "" && b.heldBy == "":
			return -1
		case a.heldBy == "" && b.heldBy != "":
			return 1
		}
		return 0
	})
	var names []string
	for i, a := range as {
		if i == 3 {
			names = append(names, fmt.Sprintf("and %d more", len(as)-3))
			break
		}
		names = append(names, a.String())
	}
	return strings.Join(names, ", ")
}

// hold is what a verdict held by a wave, or by the budget (slot), waits for.
type hold struct {
	on    []key
	halts []halt
	slot  bool
	// heldBack: a workload it waits for is held back itself (its minimum
	// interval, a storm), so it does not roll out soon.
	heldBack bool
}

// halted reports whether the change is halted, not only waiting.
func (w *hold) halted() bool { return w != nil && len(w.halts) > 0 }

// halt: the change of input is halted by a workload of an earlier wave.
type halt struct {
	input string
	by    ahead
}

// waiting is the workloads held by a wave in this process: whom to wake
// when a workload they wait for moves on (a rollout recorded, its health
// changed, gone), and what each was last told, so a wait or a halt is
// told once, not at each status update of the workloads it waits for.
// Entries live while the workload waits, and at most one term.
type waiting struct {
	mu      sync.Mutex
	m       map[key]waitEntry
	halted  prometheus.Gauge
	waiters prometheus.Gauge
}

type waitEntry struct {
	on     []key
	halts  []string  // the halted inputs, as InputKeys
	slot   bool      // waits for the budget, not a wave
	seen   time.Time // when the change was first seen (zero: not known)
	since  time.Time // when it began to wait
	told   string
	inputs map[string]bool // halted inputs already told of (an Event on each)
}

func newWaiting(reg prometheus.Registerer) *waiting {
	w := &waiting{
		m: map[key]waitEntry{},
		halted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "courier_reload_halted_changes",
			Help: "Changes of inputs whose rollout is halted: a workload of an earlier wave failed or was not healthy within --reload-wave-timeout (counted by input)."}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "courier_reload_wave_waiting",
			Help: "Workloads whose rollout waits for an earlier wave (courier.dev/reload-wave), halted ones included."}),
	}
	reg.MustRegister(w.halted, w.waiters)
	return w
}

// set records the verdict on workload k: held by a wave (v.hold), or not
// (the entry goes). It returns whether v's Event is news, and the halted
// inputs (InputKeys) not told of before.
func (w *waiting) set(k key, seen, now time.Time, v verdict) (news bool, newHalts []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	defer w.count()
	if v.hold == nil {
		delete(w.m, k)
		return true, nil
	}
	e, ok := w.m[k]
	if !ok {
		e.since = now
	}
	if !ok || !seen.IsZero() {
		e.seen = seen
	}
	if e.inputs == nil {
		e.inputs = map[string]bool{}
	}
	e.on, e.halts, e.slot = v.hold.on, nil, v.hold.slot
	for _, h := range v.hold.halts {
		ik := informers.InputKey(inputs.RefOf(h.input).Kind, k.Namespace, inputs.RefOf(h.input).Name)
		e.halts = append(e.halts, ik)
		if !e.inputs[ik] {
			e.inputs[ik] = true
			newHalts = append(newHalts, ik)
		}
	}
	news = e.told != v.message
	e.told = v.message
	w.m[k] = e
	return news, newHalts
}

// count sets the gauges; w.mu is held.
func (w *waiting) count() {
	halted := map[string]bool{}
	for _, e := range w.m {
		for _, ik := range e.halts {
			halted[ik] = true
		}
	}
	waiters := 0
	for _, e := range w.m {
		if !e.slot {
			waiters++
		}
	}
	w.halted.Set(float64(len(halted)))
	w.waiters.Set(float64(waiters))
}

// waitingOn is the workloads waiting for k, each with when its change was
// first seen.
func (w *waiting) waitingOn(k key) map[key]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[key]time.Time{}
	for waiter, e := range w.m {
		if slices.Contains(e.on, k) {
			out[waiter] = e.seen
		}
	}
	return out
}

// since is when workload k began to wait in this process (now: not yet).
func (w *waiting) since(k key, now time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.m[k]; ok {
		return e.since
	}
	return now
}

// reset: the term ended; the next one syncs every workload again.
func (w *waiting) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.m = map[key]waitEntry{} // a new map: Go maps never shrink
	w.count()
}

// wake syncs again the workloads waiting for k, which moved on.
func (c *Controller) wake(k key) {
	for waiter, seen := range c.waiting.waitingOn(k) {
		c.queue.Add(waiter, seen)
	}
}
