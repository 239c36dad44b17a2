package eventsink

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
)

// api is an API server that takes a while to write each Event.
type api struct {
	mu      sync.Mutex
	created map[string]int // by involved object
	fail    int            // the first fail creates fail to reach it
}

func (a *api) Create(e *corev1.Event) (*corev1.Event, error) {
	time.Sleep(time.Millisecond)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.fail > 0 {
		a.fail--
		return nil, fmt.Errorf("connection refused")
	}
	a.created[e.InvolvedObject.Name]++
	return e, nil
}
func (a *api) Update(e *corev1.Event) (*corev1.Event, error)          { return e, nil }
func (a *api) Patch(e *corev1.Event, _ []byte) (*corev1.Event, error) { return e, nil }
func (a *api) count() (objects, events int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.created {
		events += n
	}
	return len(a.created), events
}

// Every Event of a burst far beyond the broadcaster's queue of 1,000 is
// written, once, through client-go's own broadcaster: the sink, not the
// broadcaster, holds what waits. They come at about 10,000 a second, ten
// times what one request at a time to this API writes: given this API
// directly, the broadcaster wrote 1,503 of the 5,000 and dropped the rest.
func TestABurstOfEventsIsWrittenWhole(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := &api{created: map[string]int{}, fail: 3}
	b := record.NewBroadcaster(record.WithContext(ctx))
	defer b.Shutdown()
	b.StartRecordingToSink(New(ctx, a, Workers, Queue, zap.NewNop()))
	r := b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "courier"})
	const n = 5000
	for i := range n {
		if i%10 == 0 {
			time.Sleep(time.Millisecond) // rollouts record them as they go, not all in one instant
		}
		r.Event(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint(i), UID: "u"}}, corev1.EventTypeNormal, "Reloaded", "changed")
	}
	deadline := time.Now().Add(time.Minute)
	for {
		objects, events := a.count()
		if objects == n && events == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Events written for %d objects, want %d for %d", events, objects, n, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
