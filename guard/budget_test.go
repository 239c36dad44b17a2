package guard

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"
)

func TestBudgetAllowsFiveRevertsAMinuteThenBacksOffExponentially(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(0, 0))
	b := NewBudget(prometheus.NewRegistry(), clk)

	revert := func() time.Duration {
		wait, _ := b.Allow("Secret", "ns/x")
		if wait == 0 {
			b.Reverted("Secret", "ns/x")
		}
		return wait
	}
	for i := range RevertsPerWindow {
		if wait := revert(); wait != 0 {
			t.Fatalf("revert %d denied (wait %s)", i+1, wait)
		}
		clk.SetTime(clk.Now().Add(time.Second))
	}
	wantBackoffs := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second, 300 * time.Second}
	for i, want := range wantBackoffs {
		wait, newly := b.Allow("Secret", "ns/x")
		if wait != want || !newly {
			t.Fatalf("contest %d: wait %s newly %v, want %s true", i+1, wait, newly, want)
		}
		clk.SetTime(clk.Now().Add(time.Second))
		if wait, newly := b.Allow("Secret", "ns/x"); wait != want-time.Second || newly {
			t.Fatalf("during backoff %d: wait %s newly %v, want %s false", i+1, wait, newly, want-time.Second)
		}
		// The fight goes on after the backoff: five more reverts are allowed, then the next contest.
		clk.SetTime(clk.Now().Add(want))
		for j := range RevertsPerWindow {
			if wait := revert(); wait != 0 {
				t.Fatalf("after backoff %d, revert %d denied", i+1, j+1)
			}
		}
	}
	if wait, _ := b.Allow("Secret", "ns/other"); wait != 0 {
		t.Errorf("another replica is throttled too")
	}
}

func TestBudgetResetsAfterQuiet(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(0, 0))
	b := NewBudget(prometheus.NewRegistry(), clk)
	for range RevertsPerWindow {
		b.Allow("Secret", "ns/x")
		b.Reverted("Secret", "ns/x")
	}
	if wait, _ := b.Allow("Secret", "ns/x"); wait != FirstBackoff {
		t.Fatalf("wait %s, want %s", wait, FirstBackoff)
	}
	clk.SetTime(clk.Now().Add(ResetAfter + time.Second))
	if wait, _ := b.Allow("Secret", "ns/x"); wait != 0 {
		t.Fatalf("not reset after %s of quiet", ResetAfter)
	}
}

func TestRevertsOutsideTheWindowDoNotCount(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(0, 0))
	b := NewBudget(prometheus.NewRegistry(), clk)
	for i := range 20 {
		if wait, _ := b.Allow("Secret", "ns/x"); wait != 0 {
			t.Fatalf("revert %d denied though reverts are 13 s apart", i+1)
		}
		b.Reverted("Secret", "ns/x")
		clk.SetTime(clk.Now().Add(13 * time.Second)) // at most 5 in any minute
	}
}

func TestOnlyWrittenRevertsCount(t *testing.T) {
	b := NewBudget(prometheus.NewRegistry(), testingclock.NewFakePassiveClock(time.Unix(0, 0)))
	for i := range 3 * RevertsPerWindow {
		if wait, _ := b.Allow("Secret", "ns/x"); wait != 0 {
			t.Fatalf("attempt %d denied though no revert was written", i+1)
		}
	}
}

func TestBudgetIsPerKindAndForgetsQuietReplicas(t *testing.T) {
	clk := testingclock.NewFakePassiveClock(time.Unix(0, 0))
	b := NewBudget(prometheus.NewRegistry(), clk)
	for range RevertsPerWindow {
		b.Allow("ConfigMap", "ns/app")
		b.Reverted("ConfigMap", "ns/app")
	}
	if wait, _ := b.Allow("ConfigMap", "ns/app"); wait == 0 {
		t.Fatal("the ConfigMap is not contested after 5 reverts")
	}
	if wait, _ := b.Allow("Secret", "ns/app"); wait != 0 {
		t.Errorf("the Secret of the same name is held off %s by the ConfigMap's fight", wait)
	}
	b.Forget("Secret", "ns/app")
	if got := b.Len(); got != 1 {
		t.Fatalf("Len = %d after forgetting the Secret, want 1", got)
	}
	clk.SetTime(clk.Now().Add(ResetAfter + Window + time.Second))
	b.Allow("Secret", "ns/other")
	if got := b.Len(); got != 1 {
		t.Errorf("Len = %d, want 1: the quiet ConfigMap's history should be gone", got)
	}
}
