package reloader

import (
	"context"
	"sync"
	"time"
)

// ReplicationWait is the longest a change waits for the replicator
// (Options.Replicating) before its rollout goes ahead regardless: one source
// change to 10,000 namespaces takes the replicator about 10 s on two cores,
// and a replicator that never goes idle must not hold rollouts back.
const ReplicationWait = 30 * time.Second

// replicationPoll is how often the waiting changes look again.
const replicationPoll = 250 * time.Millisecond

// waitsForReplication reports whether a change first seen at seen waits
// for the replicator. A sync with no change behind it (a term's resync, a
// retry) never waits.
func (c *Controller) waitsForReplication(seen time.Time) bool {
	return c.opts.Replicating != nil && !seen.IsZero() &&
		c.opts.Clock.Since(seen) < ReplicationWait && c.opts.Replicating()
}

// parked is the workloads whose change waits for the replicator, with when
// each change was first seen. One loop asks the replicator every
// replicationPoll while any waits and queues them again once it is idle (or
// they waited ReplicationWait): one source change to 10,000 namespaces parks
// 10,000 workloads, and a timer each, every 250 ms, cost a tenth of
// courier's CPU while the replicas were written.
type parked struct {
	mu      sync.Mutex
	keys    map[key]time.Time
	running bool
}

func (c *Controller) park(ctx context.Context, k key, seen time.Time) {
	c.parked.mu.Lock()
	defer c.parked.mu.Unlock()
	if c.parked.keys == nil {
		c.parked.keys = map[key]time.Time{}
	}
	if s, ok := c.parked.keys[k]; !ok || seen.Before(s) {
		c.parked.keys[k] = seen
	}
	if !c.parked.running {
		c.parked.running = true
		go c.releaseParked(ctx)
	}
}

// releaseParked queues the parked workloads that need wait no more, until
// none is left. When ctx (the term that started it) ends, it queues every
// one of them and stops: a closed queue drops them (the next term's resync
// syncs every workload), and one parked by the next term before this loop
// saw its own term end goes on that term's queue, not lost.
func (c *Controller) releaseParked(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
		case <-c.opts.Clock.After(replicationPoll):
		}
		replicating := ctx.Err() == nil && c.opts.Replicating()
		c.parked.mu.Lock()
		for k, seen := range c.parked.keys {
			if !replicating || c.opts.Clock.Since(seen) >= ReplicationWait {
				c.queue.Add(k, seen)
				delete(c.parked.keys, k)
			}
		}
		if len(c.parked.keys) == 0 {
			c.parked.keys = nil // made anew by the next park: Go maps never shrink
			c.parked.running = false
			c.parked.mu.Unlock()
			return
		}
		c.parked.mu.Unlock()
	}
}
