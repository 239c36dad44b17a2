package reloader

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/courier-k8s/courier/internal/metrics"
)

// storms is the circuit breaker per input: an input whose content changed
// more than Changes times within Window (a change within one debounce of
// the last counted one counts with it, as they give one rollout) stops
// causing rollouts until it has
// not changed for a whole Window; then its consumers roll out once, if
// what they consume differs from what they were given (their baseline was
// left as it was). It keeps, per input that changed within the last window,
// the times of its last Changes+1 changes: an input is forgotten once quiet
// for a window, or deleted.
type storms struct {
	changes  int // 0: no breaker
	window   time.Duration
	coalesce time.Duration // changes closer than this are one
	now      func() time.Time

	mu    sync.Mutex
	times map[string][]time.Time // by input key, oldest first
	swept time.Time
}

func newStorms(changes int, window, coalesce time.Duration, now func() time.Time) *storms {
	return &storms{changes: changes, window: window, coalesce: coalesce, now: now, times: map[string][]time.Time{}}
}

// changed records a change of input at now, and reports whether this change
// trips the breaker (it was not tripped just before).
func (s *storms) changed(input string, now time.Time) (tripped bool) {
	if s.changes <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.Sub(s.swept) >= s.window {
		s.swept = now
		for k, t := range s.times {
			if now.Sub(t[len(t)-1]) >= s.window {
				delete(s.times, k) // quiet for a window: forgotten
			}
		}
	}
	was, _ := storm(s.times[input], now, s.changes, s.window)
	t := s.times[input]
	if n := len(t); n > 0 && now.Sub(t[n-1]) < s.coalesce {
		return false // the same burst as the change at t[n-1]: one rollout, one change
	}
	t = append(t, now)
	if len(t) > s.changes+1 {
		t = t[len(t)-s.changes-1:]
	}
	s.times[input] = t
	is, _ := storm(t, now, s.changes, s.window)
	return is && !was
}

// suppressed reports whether input causes no rollout now, and if so when
// it will be quiet again.
func (s *storms) suppressed(input string, now time.Time) (bool, time.Time) {
	if s.changes <= 0 {
		return false, time.Time{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.times[input]
	if len(t) > 0 && now.Sub(t[len(t)-1]) >= s.window {
		delete(s.times, input) // quiet for a window: forgotten
		return false, time.Time{}
	}
	return storm(t, now, s.changes, s.window)
}

func (s *storms) forget(input string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.times, input)
}

// storm decides from the times of an input's latest changes (oldest first,
// at most changes+1): it is in a storm when more than changes of them fell
// within one window and the last is less than a window ago; quiet is when
// that ends.
func storm(times []time.Time, now time.Time, changes int, window time.Duration) (bool, time.Time) {
	if len(times) <= changes {
		return false, time.Time{}
	}
	first, last := times[len(times)-changes-1], times[len(times)-1]
	if last.Sub(first) > window || now.Sub(last) >= window {
		return false, time.Time{}
	}
	return true, last.Add(window)
}

var suppressedDesc = prometheus.NewDesc(metrics.Namespace+"_reloader_suppressed_inputs",
	"Secrets and ConfigMaps whose changes cause no rollout now: each changed more than --reload-storm-changes times within --reload-storm-window, and resumes once quiet for a window.", nil, nil)

// Describe and Collect make storms the collector of suppressedDesc.
func (s *storms) Describe(ch chan<- *prometheus.Desc) { ch <- suppressedDesc }

func (s *storms) Collect(ch chan<- prometheus.Metric) {
	now := s.now()
	n := 0
	s.mu.Lock()
	for _, t := range s.times {
		if in, _ := storm(t, now, s.changes, s.window); in {
			n++
		}
	}
	s.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(suppressedDesc, prometheus.GaugeValue, float64(n))
}
