package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
)

// repetition is one repetition of a scenario timed against a floor: courier's
// span and the floor alone measured right before and right after it, so a
// floor that drifted during the repetition shows.
type repetition struct {
	Seconds     float64 `json:"seconds"`
	FloorBefore float64 `json:"floorBeforeSeconds"`
	FloorAfter  float64 `json:"floorAfterSeconds"`
	// Ratio: Seconds ÷ the mean of the two floors.
	Ratio float64 `json:"pairedRatio"`
	// Invalid says why the repetition does not count ("" when it does).
	Invalid string `json:"invalid,omitempty"`
}

// floorTolerance is how far a repetition's two floors may differ, as a
// share of their mean, before the repetition is invalid: the machine's
// speed changed while courier was measured, so no floor fits it.
const floorTolerance = 0.3

// minValid is how many valid repetitions a run needs for its median to
// count towards a verdict.
const minValid = 3

// judgeRepetitions returns reps with each one's ratio and validity. The
// rule looks at the floors alone, never at courier's span: a rule that did
// (say, "a floor slower than courier is no floor") would keep exactly the
// repetitions where courier looks slow, and select on the result.
func judgeRepetitions(reps []repetition) []repetition {
	out := slices.Clone(reps)
	for i := range out {
		r := &out[i]
		mean := (r.FloorBefore + r.FloorAfter) / 2
		r.Ratio = r.Seconds / mean
		r.Invalid = ""
		if d := math.Abs(r.FloorBefore - r.FloorAfter); d > floorTolerance*mean {
			r.Invalid = fmt.Sprintf("the floor drifted from %.3fs before to %.3fs after (%.0f%% of their mean; at most %.0f%%)",
				r.FloorBefore, r.FloorAfter, 100*d/mean, 100*floorTolerance)
		}
	}
	return out
}

// valid is the valid repetitions' spans, floors (each the mean of its two)
// and paired ratios.
func valid(reps []repetition) (spans, floors, ratios []float64) {
	for _, r := range reps {
		if r.Invalid == "" {
			spans, floors, ratios = append(spans, r.Seconds), append(floors, (r.FloorBefore+r.FloorAfter)/2), append(ratios, r.Ratio)
		}
	}
	return spans, floors, ratios
}

// rejudgeFile judges every scenario of the results in path that was timed
// against floors again by the current rule, and rewrites the file: results
// committed under an older rule are then read like new ones. Only what is
// derived from the repetitions changes; every other field stays as it is.
func rejudgeFile(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var r map[string]any
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	scenarios, _ := r["scenarios"].([]any)
	for _, raw := range scenarios {
		s, _ := raw.(map[string]any)
		if s["repetitions"] == nil {
			continue
		}
		var reps []repetition
		if err := remarshal(s["repetitions"], &reps); err != nil {
			return fmt.Errorf("%s: %s: %w", path, s["name"], err)
		}
		var judged map[string]any
		name, _ := s["name"].(string)
		if err := remarshal(timedAgainstFloor(name, reps), &judged); err != nil {
			return err
		}
		for _, k := range []string{"seconds", "floorAloneSeconds", "pairedRatiosToFloorAlone", "repetitions"} {
			s[k] = judged[k]
		}
	}
	r["minValidRepetitions"] = minValid
	out, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(out, '\n'), 0o644)
}

// remarshal decodes the JSON encoding of v into out.
func remarshal(v, out any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
