package reloader

import (
	"testing"
	"time"
)

func TestStorm(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	at := func(minutes ...float64) []time.Time {
		var out []time.Time
		for _, m := range minutes {
			out = append(out, t0.Add(time.Duration(m*float64(time.Minute))))
		}
		return out
	}
	const changes, window = 3, 10 * time.Minute
	for _, c := range []struct {
		name  string
		times []time.Time
		now   time.Time
		want  bool
		quiet time.Time
	}{
		{"as many as allowed", at(0, 1, 2), t0.Add(3 * time.Minute), false, time.Time{}},
		{"one more within the window", at(0, 1, 2, 3), t0.Add(4 * time.Minute), true, t0.Add(13 * time.Minute)},
		{"one more, spread over more than the window", at(0, 4, 8, 11), t0.Add(11 * time.Minute), false, time.Time{}},
		{"quiet for a window since", at(0, 1, 2, 3), t0.Add(13 * time.Minute), false, time.Time{}},
		{"almost quiet", at(0, 1, 2, 3), t0.Add(12 * time.Minute), true, t0.Add(13 * time.Minute)},
	} {
		got, quiet := storm(c.times, c.now, changes, window)
		if got != c.want || !quiet.Equal(c.quiet) {
			t.Errorf("%s: storm = %v, %v; want %v, %v", c.name, got, quiet, c.want, c.quiet)
		}
	}
}

// The breaker trips once, holds while changes go on, and forgets the input
// once it is quiet for a window.
func TestStormsTripAndResume(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	s := newStorms(2, time.Minute, time.Second, func() time.Time { return t0 })
	// A burst within the debounce counts once.
	for i := range 5 {
		if s.changed("Secret/app/burst", t0.Add(time.Duration(i)*100*time.Millisecond)) {
			t.Error("one burst tripped the breaker")
		}
	}
	// A change every 0.9 s, just under the debounce, is no burst: counted
	// from the burst's start, every other one counts, and it trips.
	loop := newStorms(2, time.Minute, time.Second, func() time.Time { return t0 })
	tripped := false
	for i := range 10 {
		tripped = loop.changed("Secret/app/loop", t0.Add(time.Duration(i)*900*time.Millisecond)) || tripped
	}
	if !tripped {
		t.Error("a change every 0.9 s with a 1 s debounce never tripped the breaker")
	}
	var trips []int
	for i := range 5 {
		if s.changed("Secret/app/db", t0.Add(time.Duration(i)*10*time.Second)) {
			trips = append(trips, i)
		}
	}
	if len(trips) != 1 || trips[0] != 2 {
		t.Errorf("tripped at changes %v, want only at the third (index 2)", trips)
	}
	if in, quiet := s.suppressed("Secret/app/db", t0.Add(50*time.Second)); !in || !quiet.Equal(t0.Add(100*time.Second)) {
		t.Errorf("during the storm: %v, quiet %v; want suppressed until 100 s", in, quiet)
	}
	if in, _ := s.suppressed("Secret/app/other", t0); in {
		t.Error("an input that did not change is suppressed")
	}
	if in, _ := s.suppressed("Secret/app/db", t0.Add(100*time.Second)); in {
		t.Error("still suppressed after a quiet window")
	}
	if _, ok := s.times["Secret/app/db"]; ok {
		t.Errorf("a quiet input is still remembered: %v", s.times)
	}
	s.changed("Secret/app/other", t0.Add(3*time.Minute)) // sweeps what has been quiet for a window
	if len(s.times) != 1 {
		t.Errorf("after a sweep: %v, want only the input that just changed", s.times)
	}
	off := newStorms(0, time.Minute, 0, time.Now)
	for range 10 {
		if off.changed("x", t0) {
			t.Error("a breaker with changes 0 tripped")
		}
	}
}
