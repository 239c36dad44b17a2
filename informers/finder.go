package informers

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/utils/clock"

	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Finder reads a Secret or ConfigMap by name whatever
// --resource-label-selector says (view.Finder): a list in its namespace
// with the field selector metadata.name, which the list permission of
// courier's Role allows (no get), asking for metadata only, and keeping
// none of its annotations, so no value ever reaches courier. It is how courier tells an object that left its
// selector (the API server sends DELETED for both) from one deleted.
//
// One source deleted or relabelled out fans out into a sync of each of its
// replicas, each asking the same question: an answer is reused for
// findFresh, so the API server answers it once per wave, not once per
// replica.
type Finder struct {
	client metadata.Interface
	clock  clock.PassiveClock

	mu      sync.Mutex
	answers map[string]answer // by "Kind namespace/name"
}

type answer struct {
	found *metav1.PartialObjectMetadata
	at    time.Time
}

// findFresh is how long an answer is reused: the span of one fan-out. An
// object outside the view sends courier no event, so nothing fresher could
// be known of it anyway.
const findFresh = time.Second

var _ view.Finder = (*Finder)(nil)

// NewFinder reads through client.
func NewFinder(client metadata.Interface, clk clock.PassiveClock) *Finder {
	return &Finder{client: client, clock: clk, answers: map[string]answer{}}
}

var resources = map[string]schema.GroupVersionResource{
	wellknown.KindSecret:    {Version: "v1", Resource: "secrets"},
	wellknown.KindConfigMap: {Version: "v1", Resource: "configmaps"},
}

// Find returns the metadata of kind namespace/name, or nil when there is
// none. A Helm release Secret counts as none: courier never watches them.
func (f *Finder) Find(ctx context.Context, kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	id, now := kind+" "+namespace+"/"+name, f.clock.Now()
	f.mu.Lock()
	for k, a := range f.answers { // few: one per object asked about within findFresh
		if now.Sub(a.at) >= findFresh {
			delete(f.answers, k)
		}
	}
	a, ok := f.answers[id]
	f.mu.Unlock()
	if ok {
		return a.found, nil
	}
	found, err := f.find(ctx, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	f.answers[id] = answer{found, now}
	f.mu.Unlock()
	return found, nil
}

func (f *Finder) find(ctx context.Context, kind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	gvr, ok := resources[kind]
	if !ok {
		return nil, fmt.Errorf("courier finds Secrets and ConfigMaps only, not %s", kind)
	}
	opts := metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()}
	if kind == wellknown.KindSecret {
		opts.FieldSelector += "," + SecretFieldSelector
	}
	l, err := f.client.Resource(gvr).Namespace(namespace).List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if m := &l.Items[i]; m.Name == name {
			// Only what tells gone from hidden is kept: annotations may
			// hold values (kubectl's last-applied configuration of a Secret
			// applied with kubectl), and nothing here needs them.
			m.Annotations, m.ManagedFields = nil, nil
			return m, nil
		}
	}
	return nil, nil
}
