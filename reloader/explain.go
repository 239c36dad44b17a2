package reloader

import (
	"fmt"
	"strings"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Explanation is a verdict told to a user (courier status): what courier
// does with the workload, in a few words; the policy that decided; and why,
// in a sentence.
type Explanation struct {
	Verdict string `json:"verdict"`
	Policy  string `json:"policy"`
	Message string `json:"message,omitempty"`
	// Wave is the workload's rollout wave (-1: none).
	Wave int `json:"wave"`
}

// What Explanation.Verdict says.
const (
	VerdictUpToDate     = "up to date"
	VerdictNotOptedIn   = "not opted in"
	VerdictRollsOut     = "rolls out"
	VerdictNotifies     = "notifies"
	VerdictHeld         = "held"
	VerdictRecords      = "records a baseline"
	VerdictDrops        = "drops its baseline"
	VerdictWaits        = "waits"
	VerdictElsewhere    = "not this installation's"
	VerdictCannotTell   = "cannot tell"
	VerdictNothingToDo  = "nothing to do"
	VerdictRecreatesJob = "recreates the Job"
	VerdictWaitsForWave = "waits for an earlier wave"
	VerdictHalted       = "halted"
)

// explain tells verdict v, decided over facts f. Like the policies, it
// reads nothing and emits nothing.
func explain(f *facts, v verdict) Explanation {
	e := Explanation{Policy: v.policy, Message: v.message, Wave: f.wave}
	changed := ""
	if v.d != nil {
		changed = strings.Join(v.d.changed, ", ")
	}
	switch v.do {
	case doFail, doRetry:
		e.Verdict, e.Message = VerdictCannotTell, v.err.Error()
	case doPark:
		e.Verdict, e.Message = VerdictWaits, "a change waits for the replicator to finish its writes"
	case doCreateJob:
		e.Verdict, e.Message = VerdictRecreatesJob, "it was deleted to be recreated and is created again"
	case doWait:
		e.Verdict, e.Message = VerdictWaits, fmt.Sprintf("the debounce window of its inputs' changes ends in %s", v.after)
	case doWriteBaseline:
		e.Verdict = VerdictRecords
		switch {
		case v.d.firstSight:
			e.Message = "first sight: courier records what it consumes and rolls nothing out; a later change rolls it out"
		case v.forget:
			e.Message = "its pod template changed after its inputs did: its own rollout gives the new pods the new content"
		case v.d.unchanged:
			e.Message = "its pod template already holds this content"
		default:
			e.Message = "what it consumes moved without a change to roll out (an input appeared or went for good)"
		}
	case doDropBaseline:
		e.Verdict, e.Message = VerdictDrops, "nothing it consumes is opted in any more"
	case doKeepPending:
		e.Verdict = VerdictHeld
		switch {
		case v.hold.halted():
			e.Verdict = VerdictHalted
		case v.hold != nil && !v.hold.heldBack && !v.hold.slot:
			e.Verdict = VerdictWaitsForWave
		}
	case doNotify:
		e.Verdict, e.Message = VerdictNotifies, fmt.Sprintf("%s changed: courier tells of the rollout and makes none (%s)", changed, v.why)
	case doRollOut:
		e.Verdict, e.Message = VerdictRollsOut, changed+" changed since its pods were given their content"
	default: // doNothing
		e.Verdict, e.Message = nothing(f, v)
	}
	return e
}

// nothing tells a verdict to do nothing: the workload runs what it
// consumes, or is not courier's to reload (yet).
func nothing(f *facts, v verdict) (string, string) {
	switch {
	case f.rolloutOwned:
		return VerdictNothingToDo, "its pod template is reloaded through the Argo Rollout that takes it (spec.workloadRef)"
	case f.otherInstallation:
		_, st := parseBaseline(f.recorded)
		return VerdictElsewhere, fmt.Sprintf("its baseline was written by the courier installation in namespace %s, which reloads it", st.installation)
	case v.d == nil || len(f.observed.optional) == 0:
		return VerdictNotOptedIn, fmt.Sprintf("no input is opted in: annotate it %s: \"true\", name inputs in %s, or annotate an input %s: \"true\"",
			wellknown.Reload, wellknown.ReloadOn, wellknown.Reload)
	case len(v.d.missing) > 0:
		return VerdictHeld, fmt.Sprintf("%s is gone: nothing rolls out until it is back", strings.Join(v.d.missing, ", "))
	case f.key.Kind == workload.Job && f.job.deleting:
		return VerdictNothingToDo, "the Job is being deleted"
	}
	return VerdictUpToDate, "its pods run what it consumes now"
}
