package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJudgeRepetitions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reps    []repetition
		invalid []string // per repetition: a part of the reason, or "" for valid
		ratios  []float64
	}{{
		name:    "steady floors: every repetition counts, ratio to the mean of its floors",
		reps:    []repetition{{Seconds: 12, FloorBefore: 10, FloorAfter: 10}, {Seconds: 12.1, FloorBefore: 10, FloorAfter: 12}, {Seconds: 10.5, FloorBefore: 12, FloorAfter: 9}},
		invalid: []string{"", "", ""},
		ratios:  []float64{1.2, 12.1 / 11, 1},
	}, {
		// Run D's 3a at 10,000 namespaces: floors of 13.3 and 13.5 s against
		// courier's 10.6–12.3 s. Slower than courier, but steady: they count,
		// as a ratio below 1 (courier beat the floor that time). The old
		// rule dropped them and kept only the ratios above 1.
		name: "a floor slower than courier still counts when it held steady",
		reps: []repetition{{Seconds: 10.6, FloorBefore: 13.3, FloorAfter: 13.5}, {Seconds: 12.3, FloorBefore: 13.5, FloorAfter: 6.1},
			{Seconds: 11.7, FloorBefore: 6.1, FloorAfter: 5.8}, {Seconds: 11, FloorBefore: 5.8, FloorAfter: 6}, {Seconds: 11.5, FloorBefore: 6, FloorAfter: 6.2}},
		invalid: []string{"", "drifted from 13.500s before to 6.100s after", "", "", ""},
		ratios:  []float64{10.6 / 13.4, 11.7 / 5.95, 11 / 5.9, 11.5 / 6.1},
	}, {
		name:    "a floor that drifted more than 30% of its mean: invalid, whatever courier did",
		reps:    []repetition{{Seconds: 3, FloorBefore: 2, FloorAfter: 2}, {Seconds: 3, FloorBefore: 2, FloorAfter: 1.4}, {Seconds: 3, FloorBefore: 2, FloorAfter: 1.5}},
		invalid: []string{"", "(35% of their mean; at most 30%)", ""},
		ratios:  []float64{1.5, 3 / 1.75},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := judgeRepetitions(tc.reps)
			for i, r := range got {
				if (tc.invalid[i] == "") != (r.Invalid == "") || !strings.Contains(r.Invalid, tc.invalid[i]) {
					t.Errorf("repetition %d: invalid %q, want %q", i+1, r.Invalid, tc.invalid[i])
				}
			}
			_, _, ratios := valid(got)
			if len(ratios) != len(tc.ratios) {
				t.Fatalf("ratios %v, want %v", ratios, tc.ratios)
			}
			for i := range ratios {
				if d := ratios[i] - tc.ratios[i]; d > 1e-9 || d < -1e-9 {
					t.Errorf("ratio %d = %g, want %g", i+1, ratios[i], tc.ratios[i])
				}
			}
		})
	}
}

// TestEveryRepetitionInvalidStillWritesResults: the second bench-scale run
// at 1,000 namespaces had all six repetitions of 3a invalid; its median was
// NaN, results.json could not be encoded and was written empty. A scenario
// with no valid repetition is N = 0 and encodes.
func TestEveryRepetitionInvalidStillWritesResults(t *testing.T) {
	s := timedAgainstFloor("3a. one source update → all replicas", []repetition{
		{Seconds: 0.62, FloorBefore: 1.21, FloorAfter: 0.83}, {Seconds: 0.7, FloorBefore: 0.83, FloorAfter: 0.46}, {Seconds: 0.86, FloorBefore: 0.46, FloorAfter: 0.75}})
	if s.Stats.N != 0 || len(s.PairedAlone) != 0 {
		t.Fatalf("every repetition invalid, yet stats %+v, ratios %v", s.Stats, s.PairedAlone)
	}
	b, err := json.Marshal(results{Scenarios: []scenario{s}})
	if err != nil {
		t.Fatalf("results do not encode: %v", err)
	}
	if !strings.Contains(string(b), `"n":0`) || strings.Count(string(b), `"invalid":`) != 3 {
		t.Errorf("results: %s", b)
	}
}
