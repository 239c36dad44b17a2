package main

import (
	"fmt"
	"math"
	"slices"
)

// repetition is one repetition of a scenario timed against a floor: courier's
// span and the floor alone measured right before and right after it (courier
// stopped), so a floor that drifted during the repetition shows.
type repetition struct {
	Seconds     float64 `json:"seconds"`
	FloorBefore float64 `json:"floorBeforeSeconds"`
	FloorAfter  float64 `json:"floorAfterSeconds"`
	// Ratio: Seconds ÷ the mean of the two floors.
	Ratio float64 `json:"pairedRatio"`
	// Invalid says why the repetition does not count ("" when it does).
	Invalid string `json:"invalid,omitempty"`
}

// floorTolerance is how far off the median of a run's floors a floor may be
// before its repetition is invalid: the machine was busy with something else.
const floorTolerance = 0.3

// judgeRepetitions returns reps with each one's ratio and validity. A floor
// is a lower bound: a repetition whose floor (either one) is slower than
// courier's span, or more than floorTolerance off the median of every floor
// of the run, measured a disturbed machine and does not count.
func judgeRepetitions(reps []repetition) []repetition {
	var floors []float64
	for _, r := range reps {
		floors = append(floors, r.FloorBefore, r.FloorAfter)
	}
	med := summarize(floors).Median
	out := slices.Clone(reps)
	for i := range out {
		r := &out[i]
		r.Ratio = r.Seconds / ((r.FloorBefore + r.FloorAfter) / 2)
		r.Invalid = ""
		for _, f := range []struct {
			name string
			s    float64
		}{{"before", r.FloorBefore}, {"after", r.FloorAfter}} {
			switch {
			case r.Invalid != "":
			case f.s > r.Seconds:
				r.Invalid = fmt.Sprintf("the floor %s (%.3fs) is slower than courier (%.3fs)", f.name, f.s, r.Seconds)
			case math.Abs(f.s-med) > floorTolerance*med:
				r.Invalid = fmt.Sprintf("the floor %s (%.3fs) is %.0f%% off the floors' median (%.3fs)", f.name, f.s, 100*(f.s-med)/med, med)
			}
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
