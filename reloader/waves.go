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

// blindNamespace is the kind of an ahead that is a watched namespace
// courier cannot list now (its Name), not a workload.
const blindNamespace = "Namespace"

func (a ahead) String() string {
	switch {
	case a.key.Kind == blindNamespace:
		return fmt.Sprintf("namespace %s (%s)", a.key.Name, a.heldBy)
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
	seen := map[string]bool{} // UID and input: one workload may count for one input and not another
	self := map[types.UID]bool{f.w.GetUID(): true}
	if f.via != nil {
		self[f.via.GetUID()] = true
	}
	for _, id := range changed {
		ref := inputs.RefOf(id)
		if ref.Kind != wellknown.KindSecret && ref.Kind != wellknown.KindConfigMap {
			continue // a CSI class is one namespace's
		}
		family, replicated := c.family(ref.Kind, f.key.Namespace, ref.Name)
		if replicated {
			// Copies of it may be consumed in a watched namespace courier
			// cannot list now: what is there is not known, so not done.
			for _, ns := range c.opts.View.Blind() {
				f.ahead = append(f.ahead, ahead{input: id, key: key{Kind: blindNamespace, Name: ns}, pending: true,
					heldBy: "courier cannot list there now (its Role missing, or not listed again yet), so what consumes the change there is not known"})
			}
		}
		for _, in := range family {
			for kind, info := range c.kindList() {
				if !workload.Waits(kind) {
					continue
				}
				objs, err := informers.Consumers(info.indexer, in)
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
									if err := c.consider(ctx, f, seen, self, r, ro, id, in); err != nil {
										return err
									}
								}
							}
						}
						continue
					}
					if err := c.consider(ctx, f, seen, self, k, o, id, in); err != nil {
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
func (c *Controller) consider(ctx context.Context, f *facts, seen map[string]bool, self map[types.UID]bool, k key, obj any, id, input string) error {
	m := obj.(metav1.Object)
	if self[m.GetUID()] || seen[string(m.GetUID())+" "+id] {
		return nil
	}
	seen[string(m.GetUID())+" "+id] = true
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
	a := ahead{key: k, health: c.healthOf(obj)}
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

// healthOf is what the cached workload obj's status says of its latest pod
// template; for an Argo Rollout taking its template from a Deployment
// (spec.workloadRef), also whether its controller has rolled out that
// Deployment's latest generation: courier's rollout of it changes the
// Deployment, not the Rollout, which reads Healthy until Argo catches up.
func (c *Controller) healthOf(obj any) workload.Health {
	h := workload.HealthOf(obj)
	o, ok := obj.(*workload.Object)
	if h != workload.Healthy || !ok || o.WorkloadRef == "" {
		return h
	}
	deployments, _ := c.kind(workload.Deployment)
	d, ok, err := deployments.indexer.GetByKey(o.GetNamespace() + "/" + o.WorkloadRef)
	if err != nil || !ok {
		return workload.Progressing // not known: not healthy
	}
	if g := d.(metav1.Object).GetGeneration(); o.WorkloadGeneration != g {
		return workload.Progressing
	}
	return h
}

// family is the input kind namespace/name and every object holding the same
// content by replication, as InputKeys: its source and the source's
// replicas, or its own replicas; replicated: it is a replica, or a source
// (courier.dev/replicate-to), whose copies may lie where courier cannot see.
func (c *Controller) family(kind, namespace, name string) (out []string, replicated bool) {
	out = []string{informers.InputKey(kind, namespace, name)}
	m, ok := c.object(kind, namespace, name).(metav1.Object)
	if !ok {
		return out, false
	}
	_, replicated = objmeta.Annotation(m, wellknown.ReplicateTo)
	source := namespace + "/" + name
	if s, _ := objmeta.Annotation(m, wellknown.Source); s != "" {
		replicated = true
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
	return out, replicated
}

// waveGate is the policy of rollout waves: a workload whose change has
// earlier waves still ahead waits; one of them failed, or not healthy
// within --reload-wave-timeout of its rollout, halts the change here.
func waveGate(f *facts, d *decision) (verdict, bool) {
	var ahead []ahead
	held := map[key]bool{}
	for _, a := range f.ahead {
		if slices.Contains(d.changed, a.input) && !held[a.key] {
			held[a.key] = true
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
		// From its rollout for this change, or, when that is older (a
		// rollout for an earlier change; none), from when this one began
		// to wait for this change.
		since := f.waitingSince
		if a.since.After(since) {
			since = a.since
		}
		deadline := since.Add(f.waveTimeout)
		if h, ok := f.haltedBy[a.key]; ok && !a.pending && a.health != workload.Healthy {
			// It halted this change and is not healthy yet: still halted,
			// for the same reason (its controller reporting progress
			// again, a scale, is not a fix), so told once.
			a.health = h
			v.hold.halts = append(v.hold.halts, halt{input: a.input, by: a})
			continue
		}
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
	// Woken when a workload it waits for moves (wake); looked at again
	// when the timeout would end (then halted), and at least every
	// waveRecheck, should a move have come between its read and its wait.
	v.after = waveRecheck
	if !next.IsZero() && next.Sub(f.now)+100*time.Millisecond < v.after {
		v.after = next.Sub(f.now) + 100*time.Millisecond
	}
	return v, true
}

// waveRecheck is the longest a workload waits for a wave without looking
// again (a read of the cache, no API call).
const waveRecheck = 30 * time.Second

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

// waiting is the workloads held by a wave (or the budget) in this process:
// whom to wake when a workload they wait for moves on (a rollout recorded,
// its health changed, gone), and what each was last told, so a wait or a
// halt is told once, not at each status update of the workloads it waits
// for. Entries live while the workload waits, and at most one term; the
// gauges and the index by the workloads waited for are kept as entries
// change, so nothing here walks every waiting workload.
type waiting struct {
	mu      sync.Mutex
	m       map[key]waitEntry
	by      map[key]map[key]bool // waited for → waiting
	halts   map[string]int       // halted input (InputKey) → workloads held on it
	waves   int                  // entries waiting for a wave, not a slot
	halted  prometheus.Gauge
	waiters prometheus.Gauge
}

type waitEntry struct {
	on       []key
	halts    []string                // the halted inputs, as InputKeys
	haltedBy map[key]workload.Health // the workloads that halt it, with their health then
	slot     bool                    // waits for the budget, not a wave
	seen     time.Time               // when the change was first seen (zero: not known)
	target   string                  // the content it waits to roll out (its new baseline)
	since    time.Time               // when it began to wait for target
	told     string
	inputs   map[string]bool // halted inputs already told of (an Event on each), for target
}

func newWaiting(reg prometheus.Registerer) *waiting {
	w := &waiting{
		halted: prometheus.NewGauge(prometheus.GaugeOpts{Name: "courier_reload_halted_changes",
			Help: "Changes of inputs whose rollout is halted: a workload of an earlier wave failed or was not healthy within --reload-wave-timeout (counted by input)."}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{Name: "courier_reload_wave_waiting",
			Help: "Workloads whose rollout waits for an earlier wave (courier.dev/reload-wave), halted ones included."}),
	}
	w.clear()
	reg.MustRegister(w.halted, w.waiters)
	return w
}

// targetOf is what a verdict waits to roll out: its new baseline.
func targetOf(v verdict) string {
	if v.d == nil {
		return ""
	}
	return fmt.Sprint(v.d.baseline) // a map prints in key order
}

// set records the verdict on workload k: held (v.hold), or not (the entry
// goes). It returns whether v's Event is news, and the halted inputs
// (InputKeys) not told of before for this change.
func (w *waiting) set(k key, seen, now time.Time, v verdict) (news bool, newHalts []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, had := w.m[k]
	if had {
		w.unlink(k, old)
	}
	if v.hold == nil {
		delete(w.m, k)
		w.gauges()
		return true, nil
	}
	e := old
	if target := targetOf(v); !had || e.target != target {
		e.target, e.since, e.inputs, e.told = target, now, map[string]bool{}, "" // a new change: its own clock and news
	}
	if !had || !seen.IsZero() {
		e.seen = seen
	}
	e.on, e.halts, e.haltedBy, e.slot = v.hold.on, nil, nil, v.hold.slot
	for _, h := range v.hold.halts {
		if e.haltedBy == nil {
			e.haltedBy = map[key]workload.Health{}
		}
		if _, ok := e.haltedBy[h.by.key]; !ok {
			e.haltedBy[h.by.key] = h.by.health
		}
		ik := informers.InputKey(inputs.RefOf(h.input).Kind, k.Namespace, inputs.RefOf(h.input).Name)
		e.halts = append(e.halts, ik)
		if !e.inputs[ik] {
			e.inputs[ik] = true
			newHalts = append(newHalts, ik)
		}
	}
	if len(e.halts) == 0 {
		e.inputs = map[string]bool{} // no longer halted: a halt again is news
	}
	news = e.told != v.message
	e.told = v.message
	w.m[k] = e
	w.link(k, e)
	w.gauges()
	return news, newHalts
}

// link and unlink keep the index and counts of entry e of k; w.mu is held.
func (w *waiting) link(k key, e waitEntry) {
	for _, o := range e.on {
		if w.by[o] == nil {
			w.by[o] = map[key]bool{}
		}
		w.by[o][k] = true
	}
	for _, ik := range e.halts {
		w.halts[ik]++
	}
	if !e.slot {
		w.waves++
	}
}

func (w *waiting) unlink(k key, e waitEntry) {
	for _, o := range e.on {
		delete(w.by[o], k)
		if len(w.by[o]) == 0 {
			delete(w.by, o)
		}
	}
	for _, ik := range e.halts {
		if w.halts[ik]--; w.halts[ik] <= 0 {
			delete(w.halts, ik)
		}
	}
	if !e.slot {
		w.waves--
	}
}

// gauges sets the gauges; w.mu is held.
func (w *waiting) gauges() {
	w.halted.Set(float64(len(w.halts)))
	w.waiters.Set(float64(w.waves))
}

// waitingOn is the workloads waiting for k, each with when its change was
// first seen.
func (w *waiting) waitingOn(k key) map[key]time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[key]time.Time, len(w.by[k]))
	for waiter := range w.by[k] {
		out[waiter] = w.m[waiter].seen
	}
	return out
}

// since is when workload k began to wait in this process for the content
// target (now: not yet), and the workloads that halt that wait.
func (w *waiting) since(k key, target string, now time.Time) (time.Time, map[key]workload.Health) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.m[k]; ok && e.target == target {
		return e.since, e.haltedBy
	}
	return now, nil
}

// forgetKind drops the entries of workloads of kind (no longer reloaded).
func (w *waiting) forgetKind(kind string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, e := range w.m {
		if k.Kind == kind {
			w.unlink(k, e)
			delete(w.m, k)
		}
	}
	w.gauges()
}

// reset: the term ended; the next one syncs every workload again.
func (w *waiting) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clear()
	w.gauges()
}

// clear empties w, with new maps (Go maps never shrink); w.mu is held.
func (w *waiting) clear() {
	w.m, w.by, w.halts, w.waves = map[key]waitEntry{}, map[key]map[key]bool{}, map[string]int{}, 0
}

// NamespaceAvailable is told of a watched namespace courier's caches speak
// for again (informers.Set.OnAvailable): the workloads waiting because it
// could not look there look again.
func (c *Controller) NamespaceAvailable(ns string) { c.wake(key{Kind: blindNamespace, Name: ns}) }

// wake syncs again the workloads waiting for k, which moved on.
func (c *Controller) wake(k key) {
	for waiter, seen := range c.waiting.waitingOn(k) {
		c.queue.Add(waiter, seen)
	}
}
