package eventsink

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// An Event for an object whose namespace is being deleted is not an error
// worth a warning (nor is it tried again); a refusal for any other reason,
// such as a missing permission, is logged.
func TestRefusedEventsAreLoggedUnlessTheirNamespaceIsGoing(t *testing.T) {
	terminating := apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "e", fmt.Errorf("unable to create new content in namespace ns because it is being terminated"))
	terminating.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
	for _, tc := range []struct {
		name string
		err  error
		warn bool
	}{
		{"namespace terminating", terminating, false},
		{"namespace gone", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "ns"), false},
		{"no permission", apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, "e", fmt.Errorf("RBAC: no")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zap.DebugLevel)
			a := &refusing{err: tc.err}
			s := &Sink{EventSink: a, ctx: context.Background(), logger: zap.New(core)}
			s.send(&corev1.Event{Reason: "Reloaded"})
			if a.tries != 1 {
				t.Errorf("tried %d times, want once (an answer from the API server is final)", a.tries)
			}
			if got := logs.FilterLevelExact(zap.WarnLevel).Len() > 0; got != tc.warn {
				t.Errorf("warned = %t, want %t", got, tc.warn)
			}
			// What an operator greps for when a permission is missing.
			forbidden := false
			for _, l := range logs.All() {
				for _, f := range l.Context {
					forbidden = forbidden || strings.Contains(f.String+fmt.Sprint(f.Interface), "is forbidden")
				}
			}
			if forbidden != tc.warn && tc.name != "namespace gone" {
				t.Errorf("\"is forbidden\" logged = %t, want %t", forbidden, tc.warn)
			}
		})
	}
}

type refusing struct {
	api
	err   error
	tries int
}

func (r *refusing) Create(*corev1.Event) (*corev1.Event, error) { r.tries++; return nil, r.err }

// An Event whose create met the API server's trouble rather than its
// refusal (etcd timed out, too many requests, unavailable) is sent again:
// a 10,000-namespace bench lost 55 Reloaded Events to etcd's timeouts.
func TestAnEventMetWithTheAPIServersTroubleIsSentAgain(t *testing.T) {
	for _, err := range []error{
		apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out")),
		apierrors.NewTooManyRequests("slow down", 0),
		apierrors.NewServiceUnavailable("starting"),
		apierrors.NewTimeoutError("the request timed out", 0),
	} {
		t.Run(err.Error(), func(t *testing.T) {
			t.Parallel() // each waits a second before its second try
			a := &troubled{err: err, fails: 1}
			s := &Sink{EventSink: a, ctx: context.Background(), logger: zap.NewNop()}
			s.send(&corev1.Event{Reason: "Reloaded"})
			if a.tries != 2 {
				t.Errorf("tried %d times, want twice (the second one writes it)", a.tries)
			}
		})
	}
}

type troubled struct {
	api
	err          error
	fails, tries int
}

func (r *troubled) Create(e *corev1.Event) (*corev1.Event, error) {
	r.tries++
	if r.tries <= r.fails {
		return nil, r.err
	}
	return e, nil
}
