package reloader

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecide has a row for each line of docs/SPEC.md's Reload section that
// the decision makes; the observed inputs are what sync reads from the cache.
func TestDecide(t *testing.T) {
	obs := func(now baseline, optional map[string]bool) observed { return observed{now: now, optional: optional} }
	consumes := map[string]bool{"secret/a": false}
	tests := []struct {
		spec        string
		stored      string
		hasBaseline bool
		o           observed
		want        decision
	}{
		{"nothing opted in: courier never writes to the workload", "", false, obs(baseline{}, nil),
			decision{}},
		{"first sight of a workload: baseline only, never a rollout", "", false, obs(baseline{"secret/a": "1"}, consumes),
			decision{action: writeBaseline, firstSight: true}},
		{"restart or leader change: nothing changed, nothing written", "secret/a=1", true, obs(baseline{"secret/a": "1"}, consumes),
			decision{}},
		{"consumed content changed: one rollout naming it", "secret/a=1", true, obs(baseline{"secret/a": "2"}, consumes),
			decision{action: rollOut, changed: []string{"secret/a"}}},
		{"a change made while courier was down: one rollout once back", "secret/a=1,secret/b=1", true,
			obs(baseline{"secret/a": "2", "secret/b": "2"}, map[string]bool{"secret/a": false, "secret/b": false}),
			decision{action: rollOut, changed: []string{"secret/a", "secret/b"}}},
		{"a consumed object deleted: InputMissing, no rollout", "secret/a=1", true, obs(baseline{}, consumes),
			decision{action: writeBaseline, missing: []string{"secret/a"}}},
		{"an optional consumed object deleted: no event, no rollout", "secret/a=1", true, obs(baseline{}, map[string]bool{"secret/a": true}),
			decision{action: writeBaseline}},
		{"an input no longer consumed: dropped from the baseline quietly", "secret/a=1,secret/b=1", true, obs(baseline{"secret/a": "1"}, consumes),
			decision{action: writeBaseline}},
		{"a referenced object appearing for the first time: no rollout", "secret/a=1", true,
			obs(baseline{"secret/a": "1", "secret/b": "1"}, map[string]bool{"secret/a": false, "secret/b": false}),
			decision{action: writeBaseline, appeared: true}},
		{"opted out after a baseline: the baseline is emptied, no rollout", "secret/a=1", true, obs(baseline{}, nil),
			decision{action: writeBaseline}},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			got := decide(tt.stored, tt.hasBaseline, tt.o)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(decision{})); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
	}
}
