package replicator

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// conflictWindow gathers the conflicts one source change causes across its
// pairs into one ReplicaConflict Event, instead of one per namespace.
const conflictWindow = 250 * time.Millisecond

// maxNamedNamespaces bounds how many namespaces one Event names.
const maxNamedNamespaces = 10

// conflicts batches per source the namespaces where its replica is blocked.
type conflicts struct {
	mu      sync.Mutex
	pending map[key]*conflictBatch // by source key
}

type conflictBatch struct {
	src     *item
	reasons map[string]string // target namespace → why
}

// conflict records that pair k cannot be written for reason, and sends the
// source's summary Event once the window closes.
func (c *Controller) conflict(k key, src *item, reason string) {
	c.states.setConflict(k)
	c.metrics.conflicts.WithLabelValues(k.Kind).Inc()
	c.logger.Debug("replica conflict", zap.Stringer("pair", k), zap.String("reason", reason))

	sk := key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
	c.conflicts.mu.Lock()
	defer c.conflicts.mu.Unlock()
	b := c.conflicts.pending[sk]
	if b == nil {
		b = &conflictBatch{reasons: map[string]string{}}
		c.conflicts.pending[sk] = b
		time.AfterFunc(conflictWindow, func() { c.flushConflicts(sk) })
	}
	b.src = src
	b.reasons[k.where()] = reason
}

func (c *Controller) flushConflicts(sk key) {
	c.conflicts.mu.Lock()
	b := c.conflicts.pending[sk]
	delete(c.conflicts.pending, sk)
	c.conflicts.mu.Unlock()
	if b == nil {
		return
	}
	msg := conflictMessage(sk, b.reasons)
	c.logger.Warn("replicas not written: the name is taken", zap.Stringer("source", sk),
		zap.Int("namespaces", len(b.reasons)), zap.String("detail", msg))
	c.warn(b.src, wellknown.ReasonReplicaConflict, msg)
}

// conflictMessage names the blocked namespaces (up to maxNamedNamespaces,
// sorted) with the reason for each, and how to resolve it.
func conflictMessage(sk key, reasons map[string]string) string {
	namespaces := make([]string, 0, len(reasons))
	for ns := range reasons {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	parts := make([]string, 0, maxNamedNamespaces+1)
	for i, ns := range namespaces {
		if i == maxNamedNamespaces {
			parts = append(parts, fmt.Sprintf("and %d more", len(namespaces)-i))
			break
		}
		parts = append(parts, fmt.Sprintf("%s (%s)", ns, reasons[ns]))
	}
	return fmt.Sprintf("%s %s is not replicated into %d namespace(s) where the name is taken: %s. Delete or rename those objects, rename this source, or narrow its %s",
		sk.Kind, sk.sourceRef(), len(namespaces), strings.Join(parts, ", "), wellknown.ReplicateTo)
}
