package reloader

import (
	"context"
	"time"
)

// sync decides on one workload and carries the decision out: gather the
// facts, ask the policies for a verdict, act on it. At most one patch (a
// Rollout with workloadRef: its Deployment's template, then its record).
func (c *Controller) sync(ctx context.Context, k key) error {
	seen, _ := c.queue.Take(k)
	defer c.wake(k) // those waiting for it look again, whatever it did (its decision may have changed without a write)
	f, err := c.gather(ctx, k, seen, true)
	if f == nil && err == nil {
		// Nothing to decide on (the workload, its kind or its template's
		// holder is not there): it waits for nothing.
		c.budget.leave(k)
		c.waiting.set(k, time.Time{}, time.Time{}, verdict{})
	}
	if f == nil || err != nil {
		return err
	}
	return c.act(ctx, f, verdictOf(f))
}
