package reloader

import (
	"context"
)

// sync decides on one workload and carries the decision out: gather the
// facts, ask the policies for a verdict, act on it. At most one patch (a
// Rollout with workloadRef: its Deployment's template, then its record).
func (c *Controller) sync(ctx context.Context, k key) error {
	seen, _ := c.queue.Take(k)
	f, err := c.gather(ctx, k, seen, true)
	if f == nil || err != nil {
		return err // nothing to decide on: the workload, its kind or its template's holder is not there
	}
	return c.act(ctx, f, verdictOf(f))
}
