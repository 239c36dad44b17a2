package view

import (
	"context"
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The views of each install: cluster-wide, --watch-namespaces (one of whose
// namespaces, gone-ns, refuses courier now), a selector, and both.
func views(t *testing.T) map[string]View {
	t.Helper()
	refused := func(ns string) bool { return ns == "gone-ns" }
	mk := func(namespaces []string, sel string) View {
		v, err := New(namespaces, sel, refused)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return map[string]View{
		"cluster-wide": mk(nil, ""),
		"namespaces":   mk([]string{"a", "b", "gone-ns"}, ""),
		"selector":     mk(nil, "courier-scope=yes"),
		"both":         mk([]string{"a", "b", "gone-ns"}, "courier-scope=yes"),
	}
}

func TestWhereEachViewPutsThings(t *testing.T) {
	in := map[string]string{"courier-scope": "yes"}
	tests := []struct {
		view, ns string
		labels   map[string]string
		// namespace, absent, object: what Namespace, Absent and Object say.
		namespace, absent, object Where
	}{
		{"cluster-wide", "a", nil, Inside, Inside, Inside},
		{"cluster-wide", "gone-ns", nil, Outside, Outside, Outside}, // refused: even cluster-wide, courier cannot list there
		{"namespaces", "a", nil, Inside, Inside, Inside},
		{"namespaces", "c", in, Outside, Outside, Outside},
		{"namespaces", "gone-ns", in, Outside, Outside, Outside},
		{"selector", "a", in, Inside, Unknown, Inside},
		{"selector", "a", nil, Inside, Unknown, Outside},
		{"selector", "a", map[string]string{"courier-scope": "no"}, Inside, Unknown, Outside},
		{"both", "a", in, Inside, Unknown, Inside},
		{"both", "a", nil, Inside, Unknown, Outside},
		{"both", "c", in, Outside, Outside, Outside},
		{"both", "gone-ns", in, Outside, Outside, Outside},
	}
	vs := views(t)
	for _, tt := range tests {
		t.Run(tt.view+"/"+tt.ns, func(t *testing.T) {
			v := vs[tt.view]
			if got := v.Namespace(tt.ns); got != tt.namespace {
				t.Errorf("Namespace(%s) = %s, want %s", tt.ns, got, tt.namespace)
			}
			if got := v.Absent(tt.ns); got != tt.absent {
				t.Errorf("Absent(%s) = %s, want %s", tt.ns, got, tt.absent)
			}
			if got := v.Object(tt.ns, tt.labels); got != tt.object {
				t.Errorf("Object(%s, %v) = %s, want %s", tt.ns, tt.labels, got, tt.object)
			}
		})
	}
}

func TestTheZeroViewSeesEverything(t *testing.T) {
	var v View
	if v.Scoped() || v.Selective() || v.Absent("x") != Inside || v.Object("x", nil) != Inside || v.Hiding("x") != "" {
		t.Errorf("the zero View hides something: scoped %v, absent %s, object %s, hiding %q", v.Scoped(), v.Absent("x"), v.Object("x", nil), v.Hiding("x"))
	}
}

func TestHidingNamesTheFlag(t *testing.T) {
	vs := views(t)
	for _, tt := range []struct{ view, ns, want string }{
		{"namespaces", "c", "--watch-namespaces (not watched)"},
		{"namespaces", "gone-ns", "courier may not list there now"},
		{"selector", "a", "--resource-label-selector=courier-scope=yes"},
		{"both", "c", "--watch-namespaces"},
	} {
		if got := vs[tt.view].Hiding(tt.ns); !strings.Contains(got, tt.want) {
			t.Errorf("%s: Hiding(%s) = %q, want it to contain %q", tt.view, tt.ns, got, tt.want)
		}
	}
}

func TestNewRefusesABadSelector(t *testing.T) {
	if _, err := New(nil, "a in (", nil); err == nil {
		t.Error("New accepted an invalid selector")
	}
}

// finder is a Finder over a fixed set of names.
type finder struct {
	found  map[string]bool
	labels map[string]string // of what it finds
	err    error
	reads  int
}

func (f *finder) Find(_ context.Context, kind, ns, name string) (*metav1.PartialObjectMetadata, error) {
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	if f.found[kind+" "+ns+"/"+name] {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: f.labels}}, nil
	}
	return nil, nil
}

// Confirm acts on an absence only inside the view, reading by name exactly
// when the cache cannot tell.
func TestConfirm(t *testing.T) {
	tests := []struct {
		name, view, ns string
		exists         bool // the object exists in the API server
		err            error
		want           Absence
		wantHidden     string
		reads          int
		wantErr        bool
	}{
		{name: "cluster-wide: absent is gone, no read", view: "cluster-wide", ns: "a", want: Absence{Gone: true}},
		{name: "namespaces: a watched namespace's absence is gone", view: "namespaces", ns: "a", want: Absence{Gone: true}},
		{name: "namespaces: an unwatched namespace hides it, no read", view: "namespaces", ns: "c", wantHidden: FlagNamespaces},
		{name: "namespaces: a refused namespace hides it, no read", view: "namespaces", ns: "gone-ns", wantHidden: FlagNamespaces},
		{name: "selector: left the selector", view: "selector", ns: "a", exists: true, wantHidden: FlagSelector, reads: 1},
		{name: "selector: deleted", view: "selector", ns: "a", want: Absence{Gone: true}, reads: 1},
		{name: "selector: a failed read decides nothing", view: "selector", ns: "a", err: errors.New("boom"), reads: 1, wantErr: true},
		{name: "both: unwatched, no read", view: "both", ns: "c", exists: true, wantHidden: FlagNamespaces},
		{name: "both: watched, deleted", view: "both", ns: "b", want: Absence{Gone: true}, reads: 1},
	}
	vs := views(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &finder{found: map[string]bool{"Secret " + tt.ns + "/db": tt.exists}, err: tt.err}
			got, err := vs[tt.view].Confirm(t.Context(), f, "Secret", tt.ns, "db")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got.Gone != tt.want.Gone || !strings.Contains(got.Hidden, tt.wantHidden) || (tt.wantHidden == "" && got.Hidden != "") {
				t.Errorf("Confirm = %+v, want gone %v hidden by %q", got, tt.want.Gone, tt.wantHidden)
			}
			if f.reads != tt.reads {
				t.Errorf("%d reads by name, want %d", f.reads, tt.reads)
			}
		})
	}
	if got, _ := vs["selector"].Confirm(t.Context(), nil, "Secret", "a", "db"); got.Gone {
		t.Error("without a Finder, an absence the cache cannot judge counted as gone")
	}
	// Found by name and selected: the cache lags (just created, or
	// relabelled into the selector); neither gone nor hidden.
	f := &finder{found: map[string]bool{"Secret a/db": true}, labels: map[string]string{"courier-scope": "yes"}}
	if got, err := vs["selector"].Confirm(t.Context(), f, "Secret", "a", "db"); err != nil || !got.Lagging() {
		t.Errorf("Confirm of a selected object the cache lacks = %+v (%v), want Lagging", got, err)
	}
}

func TestSelectiveIsTheSelector(t *testing.T) {
	for name, v := range views(t) {
		if want := name == "selector" || name == "both"; v.Selective() != want {
			t.Errorf("%s: Selective() = %v, want %v", name, v.Selective(), want)
		}
	}
}
