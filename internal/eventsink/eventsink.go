// Package eventsink writes courier's Kubernetes Events with several requests
// in flight. client-go's event broadcaster hands its sink one Event at a
// time and drops Events once 1,000 wait: one change that rolls out 10,000
// workloads records 10,000 Reloaded Events in a minute, and one request at a
// time (30–50 ms each on a loaded API server) wrote about 1,500 of them.
// Here Create only queues the Event and returns; workers send it.
package eventsink

import (
	"context"
	"errors"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"

	"github.com/courier-k8s/courier/internal/namespaces"
)

// Workers is how many Events are sent at once, and Queue how many may wait
// beyond the broadcaster's own 1,000 before it drops them.
const (
	Workers = 16
	Queue   = 10000
)

// Sink is a record.EventSink whose Create returns once the Event is queued.
// Update and Patch (a repeated Event's count) are sent at once: they are
// rare, and the broadcaster needs their answer.
type Sink struct {
	record.EventSink
	ctx    context.Context
	queue  chan *corev1.Event
	logger *zap.Logger
}

// New starts workers sending through api until ctx ends.
func New(ctx context.Context, api record.EventSink, workers, queue int, logger *zap.Logger) *Sink {
	s := &Sink{EventSink: api, ctx: ctx, queue: make(chan *corev1.Event, queue), logger: logger}
	for range workers {
		go s.work()
	}
	return s
}

// Create queues e and returns it as if written: the broadcaster remembers it
// to count repeats, and a repeat of an Event not yet written is patched,
// found missing and created again (the broadcaster does so itself).
func (s *Sink) Create(e *corev1.Event) (*corev1.Event, error) {
	select {
	case s.queue <- e.DeepCopy():
	case <-s.ctx.Done():
		return nil, s.ctx.Err()
	}
	return e, nil
}

func (s *Sink) work() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case e := <-s.queue:
			s.send(e)
		}
	}
}

// send creates e, trying again after a failure to reach the API server, as
// the broadcaster does, and after its trouble (a 5xx or 429: etcd timed
// out, too many requests); its refusal is final.
func (s *Sink) send(e *corev1.Event) {
	for try := 1; ; try++ {
		_, err := s.EventSink.Create(e)
		var status apierrors.APIStatus
		refused := errors.As(err, &status) && status.Status().Code != 429 && status.Status().Code < 500
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return
		case namespaces.Refused(err) || apierrors.IsNotFound(err):
			// Its namespace is being deleted, or gone, and the object with it
			// (the refusal itself is not logged: it reads like a missing
			// permission, which is logged, below).
			s.logger.Debug("an Event for an object whose namespace is going was not recorded", zap.String("reason", e.Reason),
				zap.String("object", e.InvolvedObject.Kind+" "+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name))
			return
		case refused || try == maxTries:
			s.logger.Warn("cannot record an Event", zap.String("reason", e.Reason),
				zap.String("object", e.InvolvedObject.Kind+" "+e.InvolvedObject.Namespace+"/"+e.InvolvedObject.Name), zap.Error(err))
			return
		}
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(time.Duration(try) * time.Second):
		}
	}
}

const maxTries = 5
