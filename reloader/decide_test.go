package reloader

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecide has a row for each line of docs/SPEC.md's Reload section that
// the decision makes; the observed inputs are what sync reads from the cache.
func TestDecide(t *testing.T) {
	consumes := map[string]bool{"secret/a": false}
	obs := func(now baseline, optional map[string]bool) observed { return observed{now: now, optional: optional} }
	with := func(o observed, change func(*observed)) observed { change(&o); return o }
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
			decision{action: writeBaseline, baseline: baseline{"secret/a": "1"}, firstSight: true}},
		{"restart or leader change: nothing changed, nothing written", "secret/a=1", true, obs(baseline{"secret/a": "1"}, consumes),
			decision{baseline: baseline{"secret/a": "1"}}},
		{"consumed content changed: one rollout naming it", "secret/a=1", true, obs(baseline{"secret/a": "2"}, consumes),
			decision{action: rollOut, baseline: baseline{"secret/a": "2"}, changed: []string{"secret/a"}}},
		{"a change made while courier was down: one rollout once back", "secret/a=1,secret/b=1", true,
			obs(baseline{"secret/a": "2", "secret/b": "2"}, map[string]bool{"secret/a": false, "secret/b": false}),
			decision{action: rollOut, baseline: baseline{"secret/a": "2", "secret/b": "2"}, changed: []string{"secret/a", "secret/b"}}},
		{"a consumed object deleted: InputMissing, nothing written", "secret/a=1", true, obs(baseline{}, consumes),
			decision{baseline: baseline{"secret/a": "1"}, missing: []string{"secret/a"}}},
		{"a deleted input holds back other changes: pods rolled out now could not start", "secret/a=1,secret/b=1", true,
			obs(baseline{"secret/b": "2"}, map[string]bool{"secret/a": false, "secret/b": false}),
			decision{baseline: baseline{"secret/a": "1", "secret/b": "2"}, missing: []string{"secret/a"}}},
		{"a deleted input created again with other content: one rollout", "secret/a=1", true, obs(baseline{"secret/a": "2"}, consumes),
			decision{action: rollOut, baseline: baseline{"secret/a": "2"}, changed: []string{"secret/a"}}},
		{"with --resource-label-selector, an input never seen (perhaps outside it) holds nothing back", "secret/a=1", true,
			with(obs(baseline{"secret/a": "2"}, map[string]bool{"secret/a": false, "secret/b": false}), func(o *observed) { o.selective = true }),
			decision{action: rollOut, baseline: baseline{"secret/a": "2"}, changed: []string{"secret/a"}}},
		{"with --resource-label-selector, an input seen before and gone still holds back", "secret/a=1,secret/b=1", true,
			with(obs(baseline{"secret/a": "2"}, map[string]bool{"secret/a": false, "secret/b": false}), func(o *observed) { o.selective = true }),
			decision{baseline: baseline{"secret/a": "2", "secret/b": "1"}, missing: []string{"secret/b"}}},
		{"an input seen before that left the selector (read by name: it exists) holds nothing back and keeps its digest", "secret/a=1,secret/b=1", true,
			with(obs(baseline{"secret/a": "2"}, map[string]bool{"secret/a": false, "secret/b": false}), func(o *observed) {
				o.selective, o.hidden = true, map[string]bool{"secret/b": true}
			}),
			decision{action: rollOut, baseline: baseline{"secret/a": "2", "secret/b": "1"}, changed: []string{"secret/a"}}},
		{"an optional consumed object deleted: no event, nothing written", "secret/a=1", true, obs(baseline{}, map[string]bool{"secret/a": true}),
			decision{baseline: baseline{"secret/a": "1"}}},
		{"a consumed key removed: InputMissing naming it, nothing written", "secret/a=1", true,
			with(obs(baseline{}, consumes), func(o *observed) { o.missingKeys = map[string][]string{"secret/a": {"password"}} }),
			decision{baseline: baseline{"secret/a": "1"}, missing: []string{"secret/a (key password)"}}},
		{"an input no longer consumed: dropped from the baseline quietly", "secret/a=1,secret/b=1", true, obs(baseline{"secret/a": "1"}, consumes),
			decision{action: writeBaseline, baseline: baseline{"secret/a": "1"}}},
		{"a referenced object appearing for the first time: no rollout", "secret/a=1", true,
			obs(baseline{"secret/a": "1", "secret/b": "1"}, map[string]bool{"secret/a": false, "secret/b": false}),
			decision{action: writeBaseline, baseline: baseline{"secret/a": "1", "secret/b": "1"}, appeared: true}},
		{"opted out (on either side): the baseline is removed, so opting in again starts afresh", "secret/a=1", true, obs(baseline{}, nil),
			decision{action: dropBaseline}},
		{"a rollout that would write nothing (the template holds that hash already): baseline only", "secret/a=1", true,
			with(obs(baseline{"secret/a": "2"}, consumes), func(o *observed) { o.templateHash = digester{}.configHash(baseline{"secret/a": "2"}) }),
			decision{action: writeBaseline, baseline: baseline{"secret/a": "2"}, unchanged: true}},
		{"a key of a many-keyed input, recorded as its whole content before: rewritten, no rollout", "secret/a=W1", true,
			with(obs(baseline{"secret/a": "k1"}, consumes), func(o *observed) { o.legacy = baseline{"secret/a": "W1"} }),
			decision{action: writeBaseline, baseline: baseline{"secret/a": "k1"}}},
		{"a key of a many-keyed input, recorded as its whole content before, another key changed since: one rollout", "secret/a=W1", true,
			with(obs(baseline{"secret/a": "k1"}, consumes), func(o *observed) { o.legacy = baseline{"secret/a": "W2"} }),
			decision{action: rollOut, baseline: baseline{"secret/a": "k1"}, changed: []string{"secret/a"}}},
		{"opting in with a change (one apply): that change rolls out", "", false,
			with(obs(baseline{"secret/a": "2"}, consumes), func(o *observed) { o.previous = baseline{"secret/a": "1"} }),
			decision{action: rollOut, baseline: baseline{"secret/a": "2"}, changed: []string{"secret/a"}, firstSight: true, before: baseline{"secret/a": "1"}}},
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
