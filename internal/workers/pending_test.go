package workers

import (
	"testing"
	"time"
)

func TestKeepsTheEarliestAndTakeEndsTheWait(t *testing.T) {
	p := NewPending[string]()
	t0 := time.Unix(100, 0)
	p.Remember("k", t0.Add(time.Second))
	p.Remember("k", t0)
	p.Remember("k", t0.Add(2*time.Second))
	p.Remember("k", time.Time{})
	if got, ok := p.Take("k"); !ok || !got.Equal(t0) {
		t.Fatalf("Take = %v %v, want %v true", got, ok, t0)
	}
	if _, ok := p.Take("k"); ok {
		t.Errorf("a second Take still found the key")
	}
}
