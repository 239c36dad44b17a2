package reloader

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// The reloader's decision on one workload is three steps: gather reads
// everything the decision needs into facts (gather.go); the policies below
// turn facts into a verdict, reading and writing nothing; act carries the
// verdict out (act.go): the write, then the Event, metric, log line,
// notification and requeue the verdict names. Nothing in this file reads a
// cache, a map or the clock, or writes, logs or emits anything.

// Reasons in courier_reloader_skipped_total: a change seen that gave no rollout.
const (
	skipFirstSight = "first_sight"
	skipMissing    = "input_missing"
	skipAppeared   = "input_appeared"
	skipHeld       = "min_interval"
	skipOwnRollout = "template_changed"
	skipSuppressed = "suppressed"
	skipFinished   = "job_finished"
	skipWave       = "wave"
	skipHalted     = "halted"
	skipBudget     = "budget"
)

// resultNotified: in courier_reloader_reloads_total, a rollout told but not
// made (notify only).
const resultNotified = "notified"

// facts is everything the decision about one workload needs, read once by
// gather from the caches and the per-process state.
type facts struct {
	key  key
	seen time.Time // when the change behind this sync was first seen (zero: none)
	now  time.Time

	// Read before the workload is.
	replicating bool // the change waits for the replicator
	pendingJob  bool // a Job deleted to be recreated, not created yet

	// The workload.
	obj          any // as cached
	w            metav1.Object
	info         kindInfo
	tmplObj      any           // what holds its pod template: obj, or via
	via          metav1.Object // the Deployment a Rollout takes its template from
	cons         metav1.Object // whose inputs' changes are recorded: w or via
	rolloutOwned bool          // a Deployment whose pod template Rollouts reload (workloadRef)

	// The comparison.
	noKey             bool   // the digest key is not in the cache yet
	keyNamespace      string // courier's namespace, where the key lives
	otherInstallation bool   // another installation's baseline, and that installation is there
	installationErr   error  // whether it is there could not be read
	dg                digester
	recorded          string // courier.dev/config-inputs
	hasBaseline       bool   // false also for a baseline of another key or of a gone installation
	observed          observed
	// rekey: the baseline was written with another digester (unkeyed);
	// keyed is what the cluster's key makes of the inputs now.
	rekey bool
	keyed baseline

	// What may hold a rollout back.
	debounce        time.Duration
	debounceWait    time.Duration // what the window the inputs' changes opened still waits
	burst           time.Time     // when the first change of that window was seen
	templateChanged bool          // someone else changed the pod template since the inputs did (ownRollout)
	job             jobState
	storms          map[string]stormState // by opted-in input ID
	stormChanges    int
	stormWindow     time.Duration
	notifyMode      bool // --reload-mode=notify
	interval        time.Duration
	intervalKey     string // the annotation the interval was read from
	reloadedAt      string // courier.dev/reloaded-at

	// Rollout waves (waves.go).
	wave         int     // courier.dev/reload-wave (noWave: none)
	ahead        []ahead // the earlier waves' workloads not done with the change
	waveTimeout  time.Duration
	waitingSince time.Time // when this process first held it for a wave (now: not yet)
	// haltedBy: the workloads whose health halted this change in this
	// process, with that health; a halt holds until they are healthy.
	haltedBy map[key]workload.Health

	// The budget (budget.go): --reload-max-in-flight (0: none), and
	// whether a slot is there for this rollout.
	maxInFlight int
	slot        bool
}

// jobState is what a Job's status says of recreating it.
type jobState struct {
	deleting, neverStarted, finished, reloadFinished bool
}

// stormState is an input's circuit breaker (see storms): in a storm, and
// when it is quiet again.
type stormState struct {
	in    bool
	quiet time.Time
}

// do is what act does for a verdict.
type do int

const (
	doNothing       do = iota
	doFail             // a read failed: the error is returned, so the sync is tried again with backoff
	doRetry            // as doFail, measured from the same change (the queue remembers it)
	doPark             // wait for the replicator (replicas.go)
	doCreateJob        // create the Job deleted to be recreated
	doWriteBaseline    // write the new baseline, roll nothing out
	doDropBaseline     // remove the baseline: nothing is opted in any more
	doWait             // sync again after the rest of the debounce window
	doKeepPending      // a rollout that must wait: write nothing (see keepPending)
	doNotify           // tell the rollout, make none (notify only)
	doRollOut          // roll out (a Job: recreate it)
)

// verdict is the decision on one workload: what to do, the policy that
// decided it, and what act tells of it.
type verdict struct {
	policy string
	do     do
	// d is the comparison of the inputs with the baseline (nil when a
	// policy decided before it).
	d *decision
	// err: the failed read of doFail and doRetry.
	err error
	// skip: the reason counted in courier_reloader_skipped_total ("" none).
	skip string
	// Event on the workload ("" none), its type and message.
	event, eventType, message string
	// log: an Info line, with the workload, the changed inputs and until.
	log   string
	until time.Time
	// after: sync again this much later (0: not); measured from from
	// (zero: the wait is not the reloader's latency).
	after time.Duration
	from  time.Time
	// forget: once written, the changes since the last sync are taken in
	// (forgetTemplate).
	forget bool
	// why: for doNotify, what asked for notify only.
	why string
	// hold: what a verdict held by a wave or the budget waits for (nil:
	// none); inputMessage, when the change is halted, the Event on its input.
	hold         *hold
	inputMessage string
}

// policy decides, or passes (false) to the next one.
type policy struct {
	name   string
	decide func(f *facts, d *decision) (verdict, bool)
}

// verdictOf asks the policies in order; the first that decides wins. Those
// of beforeComparing decide without the comparison of the inputs with the
// baseline (their d is nil); the last of afterComparing always decides.
func verdictOf(f *facts) verdict {
	for _, p := range beforeComparing {
		if v, ok := p.decide(f, nil); ok {
			v.policy = p.name
			return v
		}
	}
	d := comparison(f)
	for _, p := range afterComparing {
		if v, ok := p.decide(f, &d); ok {
			v.policy = p.name
			return v
		}
	}
	panic("reloader: no policy decided") // "roll out" always does
}

var beforeComparing = []policy{
	{"waiting for replication", func(f *facts, _ *decision) (verdict, bool) {
		return verdict{do: doPark}, f.replicating
	}},
	{"Job to create again", func(f *facts, _ *decision) (verdict, bool) {
		return verdict{do: doCreateJob}, f.pendingJob
	}},
	{"pod template reloaded through a Rollout", func(f *facts, _ *decision) (verdict, bool) {
		return verdict{}, f.rolloutOwned
	}},
	{"no digest key", func(f *facts, _ *decision) (verdict, bool) {
		return verdict{do: doFail, err: fmt.Errorf("the digest key %s/%s is not there yet", f.keyNamespace, KeySecret)}, f.noKey
	}},
	{"another installation's", func(f *facts, _ *decision) (verdict, bool) {
		if f.installationErr != nil {
			return verdict{do: doFail, err: f.installationErr}, true
		}
		return verdict{}, f.otherInstallation
	}},
	{"inputs not known", func(f *facts, _ *decision) (verdict, bool) {
		return verdict{do: doRetry, err: f.observed.err}, f.observed.err != nil
	}},
}

var afterComparing = []policy{
	{"compared", func(_ *facts, d *decision) (verdict, bool) {
		v := verdict{d: d}
		switch d.action {
		case writeNothing:
		case writeBaseline:
			v.do = doWriteBaseline
		case dropBaseline:
			v.do = doDropBaseline
		case rollOut:
			return v, false
		}
		return v, true
	}},
	{"debounce", func(f *facts, d *decision) (verdict, bool) {
		// Not the end of a change's debounce (a resync, a retry, an edit of
		// the workload): wait for the rest of the window its inputs'
		// changes opened, and roll out what it gathered then.
		within := f.seen.IsZero() || f.now.Sub(f.seen) < f.debounce
		return verdict{d: d, do: doWait, after: f.debounceWait, from: f.burst}, within && f.debounceWait > 0
	}},
	{"own rollout", func(f *facts, d *decision) (verdict, bool) {
		// The owner changed the pod template after the inputs changed (a
		// Helm upgrade or kubectl apply of both): its rollout starts pods
		// that read the new content, so courier's would be a second one.
		return verdict{d: d, do: doWriteBaseline, forget: true, skip: skipOwnRollout,
			log: "not rolled out: the pod template changed after its inputs did, so the workload's own rollout gives the new pods the new content"}, f.templateChanged
	}},
	{"Job", func(f *facts, d *decision) (verdict, bool) {
		switch {
		case f.key.Kind != workload.Job:
			return verdict{}, false
		case f.job.deleting:
			return verdict{d: d}, true // going away: nothing to recreate
		case f.job.neverStarted:
			// Suspended since its creation: no pod of it has read the old
			// content, and the ones it starts read the new.
			return verdict{d: d, do: doWriteBaseline}, true
		case f.job.finished && !f.job.reloadFinished:
			// Its work is done: recreating it would run it again. Nothing
			// is written, so if it asks later, the change is still to roll out.
			return verdict{d: d, do: doKeepPending, skip: skipFinished, event: wellknown.ReasonJobFinished, eventType: corev1.EventTypeNormal, message: fmt.Sprintf(
				"%s changed, but this Job has finished, so courier does not recreate it (that would run it again); annotate it %s: \"true\" to have it recreated for such changes",
				strings.Join(d.changed, ", "), wellknown.ReloadFinished)}, true
		}
		return verdict{}, false
	}},
	{"storm", func(f *facts, d *decision) (verdict, bool) {
		// Nothing is written: the baseline stays what the pods were given,
		// so when the storm ends one rollout carries the last content.
		until, ok := suppressedUntil(f.storms, d.changed)
		return verdict{d: d, do: doKeepPending, skip: skipSuppressed, event: wellknown.ReasonReloadSuppressed, eventType: corev1.EventTypeWarning, message: fmt.Sprintf(
			"%s changed, but changes too often to roll out for (--reload-storm-changes=%d within --reload-storm-window=%s): nothing rolls out until it is quiet, %s at the earliest; then one rollout, if what this workload consumes differs from what it runs",
			strings.Join(d.changed, ", "), f.stormChanges, f.stormWindow, until.UTC().Format(time.RFC3339)),
			after: until.Sub(f.now) + 100*time.Millisecond}, ok
	}},
	{"notify only", func(f *facts, d *decision) (verdict, bool) {
		v := verdict{d: d, do: doNotify, why: "--reload-mode=notify"}
		if f.observed.notifyOnly {
			v.why = wellknown.Reload + "=" + wellknown.ReloadNotify
		}
		return v, f.observed.notifyOnly || f.notifyMode
	}},
	{"minimum interval", func(f *facts, d *decision) (verdict, bool) {
		// Nothing is written, not even the baseline, so every change made
		// until the interval ends rolls out with it, once. The interval is
		// measured from courier.dev/reloaded-at, on the workload, so a
		// restart or a new leader holds the same rollout just as long.
		until := heldUntil(f.reloadedAt, f.interval, f.now)
		return verdict{d: d, do: doKeepPending, skip: skipHeld, log: "rollout held back by the minimum interval", until: until,
			event: wellknown.ReasonReloadDelayed, eventType: corev1.EventTypeNormal, message: fmt.Sprintf(
				"%s changed within %s=%s of the last rollout (%s): it rolls out at %s, once, with every change made until then",
				strings.Join(d.changed, ", "), f.intervalKey, f.interval, f.reloadedAt, until.UTC().Format(time.RFC3339)),
			after: until.Sub(f.now)}, !until.IsZero()
	}},
	{"wave", waveGate},
	{"budget", budgetGate},
	{"roll out", func(_ *facts, d *decision) (verdict, bool) {
		return verdict{d: d, do: doRollOut}, true
	}},
}

// comparison is the inputs compared with the baseline (decide); a
// baseline written with another digester is rewritten with the cluster's
// key, once: no rollout unless decide found a real change.
func comparison(f *facts) decision {
	d := decide(f.recorded, f.hasBaseline, f.observed)
	if f.rekey && d.action != dropBaseline && len(f.observed.optional) > 0 {
		if d.action != rollOut {
			d.action = writeBaseline
		}
		d.baseline = f.keyed
	}
	return d
}

// suppressedUntil reports whether every input in changed is in a storm, and
// when the last of them is quiet. One that is not rolls out, and takes the
// others along.
func suppressedUntil(storms map[string]stormState, changed []string) (time.Time, bool) {
	var until time.Time
	for _, id := range changed {
		s := storms[id]
		if !s.in {
			return time.Time{}, false
		}
		if s.quiet.After(until) {
			until = s.quiet
		}
	}
	return until, len(changed) > 0
}
