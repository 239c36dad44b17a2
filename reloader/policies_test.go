package reloader

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

var policyNow = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// changedFacts are a Deployment whose one opted-in input, secret/a, changed
// since its baseline, seen 3 s ago (past a 2 s debounce): nothing holds the
// rollout back.
func changedFacts() *facts {
	return &facts{
		key:  key{Kind: workload.Deployment, Namespace: "ns", Name: "app"},
		seen: policyNow.Add(-3 * time.Second), now: policyNow, keyNamespace: "courier",
		recorded: "secret/a=1", hasBaseline: true,
		observed: observed{now: baseline{"secret/a": "2"}, optional: map[string]bool{"secret/a": false}},
		debounce: 2 * time.Second, stormChanges: 5, stormWindow: 10 * time.Minute,
		storms:      map[string]stormState{"secret/a": {}},
		waveTimeout: 10 * time.Minute, waitingSince: policyNow,
	}
}

// db is a workload of an earlier wave, in another namespace (a copy of the
// same source).
var db = key{Kind: workload.Deployment, Namespace: "other", Name: "db"}

// got is what a verdict says, as the table compares it.
type got struct {
	Policy, Skip, Event, EventType, Message, Log, Why string
	Do                                                do
	After                                             time.Duration
	From, Until                                       time.Time
	Forget, Err                                       bool
}

func gotOf(v verdict) got {
	return got{Policy: v.policy, Do: v.do, Skip: v.skip, Event: v.event, EventType: v.eventType, Message: v.message, Log: v.log,
		Why: v.why, After: v.after, From: v.from, Until: v.until, Forget: v.forget, Err: v.err != nil}
}

// TestPolicies has a row per policy (each deciding, and passing where it
// can), with the exact Event, metric reason and log line it names: the
// golden record of what the decision tells.
func TestPolicies(t *testing.T) {
	burst := policyNow.Add(-500 * time.Millisecond)
	lastRollout := policyNow.Add(-4 * time.Minute).Format(time.RFC3339)
	for _, tc := range []struct {
		name   string
		change func(*facts)
		want   got
	}{
		{"waiting for replication", func(f *facts) { f.replicating = true }, got{Policy: "waiting for replication", Do: doPark}},
		{"a Job deleted to be recreated is created first", func(f *facts) { f.key.Kind, f.pendingJob = workload.Job, true },
			got{Policy: "Job to create again", Do: doCreateJob}},
		{"a Deployment whose template Rollouts reload is left to them", func(f *facts) { f.rolloutOwned = true },
			got{Policy: "pod template reloaded through a Rollout", Do: doNothing}},
		{"no digest key yet: an error, retried", func(f *facts) { f.noKey = true },
			got{Policy: "no digest key", Do: doFail, Err: true}},
		{"another installation reloads it", func(f *facts) { f.otherInstallation = true },
			got{Policy: "another installation's", Do: doNothing}},
		{"whether the other installation is there is not known: retried", func(f *facts) { f.installationErr = errors.New("read") },
			got{Policy: "another installation's", Do: doFail, Err: true}},
		{"an input could not be read by name: retried from the same change", func(f *facts) { f.observed.err = errors.New("read") },
			got{Policy: "inputs not known", Do: doRetry, Err: true}},
		{"first sight: baseline only", func(f *facts) { f.recorded, f.hasBaseline = "", false },
			got{Policy: "compared", Do: doWriteBaseline}},
		{"nothing changed: nothing written", func(f *facts) { f.observed.now = baseline{"secret/a": "1"} },
			got{Policy: "compared", Do: doNothing}},
		{"opted out: the baseline is dropped", func(f *facts) { f.observed.optional = nil },
			got{Policy: "compared", Do: doDropBaseline}},
		{"a resync within the debounce window its change opened waits for the rest of it",
			func(f *facts) { f.seen, f.debounceWait, f.burst = time.Time{}, 1500*time.Millisecond, burst },
			got{Policy: "debounce", Do: doWait, After: 1500 * time.Millisecond, From: burst}},
		{"the end of a change's debounce does not wait again", func(f *facts) { f.debounceWait, f.burst = 1500*time.Millisecond, burst },
			got{Policy: "roll out", Do: doRollOut}},
		{"the owner changed the template after the input: its own rollout carries the change",
			func(f *facts) { f.templateChanged = true },
			got{Policy: "own rollout", Do: doWriteBaseline, Forget: true, Skip: skipOwnRollout,
				Log: "not rolled out: the pod template changed after its inputs did, so the workload's own rollout gives the new pods the new content"}},
		{"a Job going away: nothing", func(f *facts) { f.key.Kind, f.job.deleting = workload.Job, true },
			got{Policy: "Job", Do: doNothing}},
		{"a Job never started: baseline only", func(f *facts) { f.key.Kind, f.job.neverStarted = workload.Job, true },
			got{Policy: "Job", Do: doWriteBaseline}},
		{"a Job finished: kept pending, told", func(f *facts) { f.key.Kind, f.job.finished = workload.Job, true },
			got{Policy: "Job", Do: doKeepPending, Skip: skipFinished, Event: wellknown.ReasonJobFinished, EventType: corev1.EventTypeNormal,
				Message: "secret/a changed, but this Job has finished, so courier does not recreate it (that would run it again); annotate it courier.dev/reload-finished: \"true\" to have it recreated for such changes"}},
		{"a finished Job that asks for it is recreated", func(f *facts) { f.key.Kind, f.job = workload.Job, jobState{finished: true, reloadFinished: true} },
			got{Policy: "roll out", Do: doRollOut}},
		{"every changed input in a storm: kept pending until the last is quiet",
			func(f *facts) { f.storms["secret/a"] = stormState{in: true, quiet: policyNow.Add(4 * time.Minute)} },
			got{Policy: "storm", Do: doKeepPending, Skip: skipSuppressed, Event: wellknown.ReasonReloadSuppressed, EventType: corev1.EventTypeWarning,
				After:   4*time.Minute + 100*time.Millisecond,
				Message: "secret/a changed, but changes too often to roll out for (--reload-storm-changes=5 within --reload-storm-window=10m0s): nothing rolls out until it is quiet, 2026-11-28T10:04:00Z at the earliest; then one rollout, if what this workload consumes differs from what it runs"}},
		{"one changed input not in a storm rolls out, and takes the others along", func(f *facts) {
			f.observed.now, f.observed.optional = baseline{"secret/a": "2", "secret/b": "2"}, map[string]bool{"secret/a": false, "secret/b": false}
			f.recorded = "secret/a=1,secret/b=1"
			f.storms = map[string]stormState{"secret/a": {in: true, quiet: policyNow.Add(time.Minute)}, "secret/b": {}}
		}, got{Policy: "roll out", Do: doRollOut}},
		{"notify only, by annotation", func(f *facts) { f.observed.notifyOnly = true },
			got{Policy: "notify only", Do: doNotify, Why: "courier.dev/reload=notify"}},
		{"notify only, by --reload-mode=notify", func(f *facts) { f.notifyMode = true },
			got{Policy: "notify only", Do: doNotify, Why: "--reload-mode=notify"}},
		{"within the minimum interval of the last rollout: kept pending until its end", func(f *facts) {
			f.interval, f.intervalKey, f.reloadedAt = 10*time.Minute, wellknown.ReloadMinInterval, lastRollout
		}, got{Policy: "minimum interval", Do: doKeepPending, Skip: skipHeld, Event: wellknown.ReasonReloadDelayed, EventType: corev1.EventTypeNormal,
			After: 6 * time.Minute, Until: policyNow.Add(6 * time.Minute), Log: "rollout held back by the minimum interval",
			Message: "secret/a changed within courier.dev/reload-min-interval=10m0s of the last rollout (2026-11-28T09:56:00Z): it rolls out at 2026-11-28T10:06:00Z, once, with every change made until then"}},
		{"past the minimum interval: rolls out", func(f *facts) { f.interval, f.reloadedAt = 3*time.Minute, lastRollout },
			got{Policy: "roll out", Do: doRollOut}},
		{"a later wave waits for an earlier one still to roll out", func(f *facts) {
			f.wave, f.ahead = 1, []ahead{{input: "secret/a", key: db, wave: 0, pending: true}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipWave, Event: wellknown.ReasonReloadWaiting, EventType: corev1.EventTypeNormal,
			After:   waveRecheck,
			Message: "secret/a changed: this workload (wave 1) rolls out once the earlier waves are healthy on it; waiting for Deployment other/db (wave 0, not rolled out yet)"}},
		{"an earlier wave rolling out: waits, and looks again when the timeout would end", func(f *facts) {
			f.wave, f.waitingSince = 2, policyNow.Add(-10*time.Minute)
			f.ahead = []ahead{{input: "secret/a", key: db, wave: 1, health: workload.Progressing, since: policyNow.Add(-9*time.Minute - 50*time.Second)}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipWave, Event: wellknown.ReasonReloadWaiting, EventType: corev1.EventTypeNormal,
			After:   10*time.Second + 100*time.Millisecond,
			Message: "secret/a changed: this workload (wave 2) rolls out once the earlier waves are healthy on it; waiting for Deployment other/db (wave 1, rolling out)"}},
		{"an earlier wave's rollout failed: halted", func(f *facts) {
			f.wave, f.ahead = 1, []ahead{{input: "secret/a", key: db, wave: 0, health: workload.Failed, since: policyNow.Add(-time.Minute)}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipHalted, Event: wellknown.ReasonReloadHalted, EventType: corev1.EventTypeWarning,
			Message: "secret/a changed, but this workload (wave 1) is held: the change is halted because Deployment other/db, of wave 0, is not healthy: its rollout failed. Fix it or roll it back: once it is healthy the later waves go on by themselves; or change secret/a again, and the new content starts again at wave 0"}},
		{"halted by an earlier wave that reports progress again (scaled, say), not healthy: still halted, for the same reason", func(f *facts) {
			f.wave, f.haltedBy = 1, map[key]workload.Health{db: workload.Failed}
			f.ahead = []ahead{{input: "secret/a", key: db, wave: 0, health: workload.Progressing, since: policyNow.Add(-time.Minute)}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipHalted, Event: wellknown.ReasonReloadHalted, EventType: corev1.EventTypeWarning,
			Message: "secret/a changed, but this workload (wave 1) is held: the change is halted because Deployment other/db, of wave 0, is not healthy: its rollout failed. Fix it or roll it back: once it is healthy the later waves go on by themselves; or change secret/a again, and the new content starts again at wave 0"}},
		{"halted by an earlier wave whose own rollout is to come again (a newer input of it): waits for it, not halted", func(f *facts) {
			f.wave, f.haltedBy = 1, map[key]workload.Health{db: workload.Failed}
			f.ahead = []ahead{{input: "secret/a", key: db, wave: 0, pending: true}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipWave, Event: wellknown.ReasonReloadWaiting, EventType: corev1.EventTypeNormal,
			After:   waveRecheck,
			Message: "secret/a changed: this workload (wave 1) rolls out once the earlier waves are healthy on it; waiting for Deployment other/db (wave 0, not rolled out yet)"}},
		{"halted by an earlier wave that is healthy now (so no longer ahead): rolls out", func(f *facts) {
			f.wave, f.haltedBy = 1, map[key]workload.Health{db: workload.Failed}
		}, got{Policy: "roll out", Do: doRollOut}},
		{"halted by one workload, another ahead now fails too: halted, by the first", func(f *facts) {
			f.wave, f.haltedBy = 2, map[key]workload.Health{db: workload.Failed}
			f.ahead = []ahead{{input: "secret/a", key: db, wave: 0, health: workload.Progressing, since: policyNow.Add(-time.Minute)},
				{input: "secret/a", key: key{Kind: workload.Deployment, Namespace: "other", Name: "web"}, wave: 1, health: workload.Failed, since: policyNow.Add(-time.Minute)}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipHalted, Event: wellknown.ReasonReloadHalted, EventType: corev1.EventTypeWarning,
			Message: "secret/a changed, but this workload (wave 2) is held: the change is halted because Deployment other/db, of wave 0, is not healthy: its rollout failed. Fix it or roll it back: once it is healthy the later waves go on by themselves; or change secret/a again, and the new content starts again at wave 0"}},
		{"an earlier wave not healthy within the timeout of its rollout: halted", func(f *facts) {
			f.wave, f.waitingSince = 1, policyNow.Add(-11*time.Minute)
			f.ahead = []ahead{{input: "secret/a", key: db, wave: 0, health: workload.Progressing, since: policyNow.Add(-10 * time.Minute)}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipHalted, Event: wellknown.ReasonReloadHalted, EventType: corev1.EventTypeWarning,
			Message: "secret/a changed, but this workload (wave 1) is held: the change is halted because Deployment other/db, of wave 0, is not healthy: it is not healthy 10m0s after courier rolled it out (--reload-wave-timeout). Fix it or roll it back: once it is healthy the later waves go on by themselves; or change secret/a again, and the new content starts again at wave 0"}},
		{"a rollout for an earlier change: the timeout runs from when the wait for this one began", func(f *facts) {
			f.wave, f.waitingSince = 1, policyNow.Add(-9*time.Minute-45*time.Second)
			f.ahead = []ahead{{input: "secret/a", key: db, wave: 0, health: workload.Progressing, since: policyNow.Add(-30 * 24 * time.Hour)}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipWave, Event: wellknown.ReasonReloadWaiting, EventType: corev1.EventTypeNormal,
			After:   15*time.Second + 100*time.Millisecond,
			Message: "secret/a changed: this workload (wave 1) rolls out once the earlier waves are healthy on it; waiting for Deployment other/db (wave 0, rolling out)"}},
		{"one courier never rolled out: the timeout runs from when the wait began", func(f *facts) {
			f.wave, f.waitingSince = 1, policyNow.Add(-9*time.Minute-40*time.Second)
			f.ahead = []ahead{{input: "secret/a", key: db, wave: 0, health: workload.Progressing}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipWave, Event: wellknown.ReasonReloadWaiting, EventType: corev1.EventTypeNormal,
			After:   20*time.Second + 100*time.Millisecond,
			Message: "secret/a changed: this workload (wave 1) rolls out once the earlier waves are healthy on it; waiting for Deployment other/db (wave 0, rolling out)"}},
		{"an earlier wave held back itself: waits, and says so first", func(f *facts) {
			f.wave, f.ahead = 2, []ahead{{input: "secret/a", key: db, wave: 0, pending: true},
				{input: "secret/a", key: key{Kind: workload.Deployment, Namespace: "other", Name: "spaced"}, wave: 1, pending: true, heldBy: "minimum interval"}}
		}, got{Policy: "wave", Do: doKeepPending, Skip: skipWave, Event: wellknown.ReasonReloadWaiting, EventType: corev1.EventTypeNormal,
			After:   waveRecheck,
			Message: "secret/a changed: this workload (wave 2) rolls out once the earlier waves are healthy on it; waiting for Deployment other/spaced (wave 1, held back: minimum interval), Deployment other/db (wave 0, not rolled out yet)"}},
		{"an earlier wave ahead on an input that did not change holds nothing", func(f *facts) {
			f.wave, f.ahead = 1, []ahead{{input: "secret/b", key: db, wave: 0, pending: true}}
		}, got{Policy: "roll out", Do: doRollOut}},
		{"no slot under --reload-max-in-flight: waits its turn", func(f *facts) { f.maxInFlight = 3 },
			got{Policy: "budget", Do: doKeepPending, Skip: skipBudget, Event: wellknown.ReasonReloadWaiting, EventType: corev1.EventTypeNormal,
				Message: "secret/a changed: this workload waits for a rollout slot: --reload-max-in-flight=3 rollouts courier started are not healthy yet (courier_reload_in_flight); the waiting ones roll out in order (wave, then namespace/name) as those become healthy"}},
		{"a slot: rolls out", func(f *facts) { f.maxInFlight, f.slot = 3, true }, got{Policy: "roll out", Do: doRollOut}},
		{"nothing holds it back: one rollout", func(*facts) {}, got{Policy: "roll out", Do: doRollOut}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := changedFacts()
			tc.change(f)
			if diff := cmp.Diff(tc.want, gotOf(verdictOf(f))); diff != "" {
				t.Errorf("verdict (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPolicyOrder: with every fact that decides set at once, each policy
// wins over the ones after it — taking the facts away one by one gives the
// policies in their documented order.
func TestPolicyOrder(t *testing.T) {
	f := changedFacts()
	f.key.Kind = workload.Job
	undo := []func(){
		func() { f.replicating = false },
		func() { f.pendingJob = false },
		func() { f.rolloutOwned = false },
		func() { f.noKey = false },
		func() { f.otherInstallation = false },
		func() { f.observed.err = nil },
		func() { f.seen, f.debounceWait = policyNow.Add(-3*time.Second), 0 },
		func() { f.templateChanged = false },
		func() { f.job = jobState{} },
		func() { f.storms["secret/a"] = stormState{} },
		func() { f.notifyMode = false },
		func() { f.reloadedAt = "" },
		func() { f.ahead = nil },
		func() { f.slot = true },
	}
	f.replicating, f.pendingJob, f.rolloutOwned, f.noKey, f.otherInstallation = true, true, true, true, true
	f.observed.err, f.seen, f.debounceWait = errors.New("read"), time.Time{}, time.Second
	f.templateChanged, f.job = true, jobState{finished: true}
	f.storms["secret/a"] = stormState{in: true, quiet: policyNow.Add(time.Minute)}
	f.notifyMode, f.interval, f.reloadedAt = true, time.Hour, policyNow.Add(-time.Minute).Format(time.RFC3339)
	f.wave, f.ahead = 1, []ahead{{input: "secret/a", key: key{Kind: workload.Deployment, Namespace: "ns", Name: "db"}, pending: true}}
	f.maxInFlight = 2
	var order []string
	for _, u := range undo {
		order = append(order, verdictOf(f).policy)
		u()
	}
	order = append(order, verdictOf(f).policy)
	var want []string
	for _, p := range beforeComparing {
		want = append(want, p.name)
	}
	for _, p := range afterComparing {
		if p.name != "compared" { // it decides only when there is no rollout to make
			want = append(want, p.name)
		}
	}
	if diff := cmp.Diff(want, order); diff != "" {
		t.Errorf("the policies decide in another order (-want +got):\n%s", diff)
	}
}
