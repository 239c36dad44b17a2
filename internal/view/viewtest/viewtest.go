// Package viewtest has what the controllers' tests need to try a decision
// against each view (package view): a Finder over fixed names, and views.
package viewtest

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/view"
)

// Finder is a view.Finder that finds the objects Found names ("Kind
// namespace/name"), with Labels, and counts its reads.
type Finder struct {
	Found  map[string]bool
	Labels map[string]string
	Reads  int
}

var _ view.Finder = (*Finder)(nil)

func (f *Finder) Find(_ context.Context, kind, ns, name string) (*metav1.PartialObjectMetadata, error) {
	f.Reads++
	if !f.Found[kind+" "+ns+"/"+name] {
		return nil, nil
	}
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: f.Labels}}, nil
}

// View is view.New(namespaces, selector, nil), failing t on an error.
func View(t *testing.T, namespaces []string, selector string) view.View {
	t.Helper()
	v, err := view.New(namespaces, selector, nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
