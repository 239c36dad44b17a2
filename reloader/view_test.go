package reloader

import (
	"testing"

	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/view/viewtest"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// The reloader's call sites that act on an absence from the cache — taking
// a workload over from an installation whose digest key it lacks, counting
// an input in the baseline as missing — act only when the view says the
// absence is inside it (#48).
func TestTheReloaderActsOnAnAbsenceOnlyInsideTheView(t *testing.T) {
	selector := viewtest.View(t, nil, "courier-scope=yes")
	t.Run("installation", func(t *testing.T) {
		for _, tt := range []struct {
			name      string
			view      view.View
			exists    bool
			installed bool
			reads     int
		}{
			{"cluster-wide: no key in the cache, gone", view.View{}, true, false, 0},
			{"selector: the key found by name, installed", selector, true, true, 1},
			{"selector: no key by name either, gone", selector, false, false, 1},
			{"watch-namespaces: its namespace not watched, installed", viewtest.View(t, []string{"app", "courier"}, ""), false, true, 0},
		} {
			t.Run(tt.name, func(t *testing.T) {
				fd := &viewtest.Finder{Found: map[string]bool{wellknown.KindSecret + " ops/" + KeySecret: tt.exists}}
				f := newFixture(t, Options{View: tt.view, Finder: fd})
				got, err := f.c.installed(t.Context(), "ops")
				if err != nil || got != tt.installed || fd.Reads != tt.reads {
					t.Errorf("installed = %v (%v) after %d reads, want %v after %d", got, err, fd.Reads, tt.installed, tt.reads)
				}
			})
		}
	})
	t.Run("input", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			view   view.View
			exists bool
			hidden bool
		}{
			{"cluster-wide: missing", view.View{}, true, false},
			{"selector: found by name, outside the view", selector, true, true},
			{"selector: not found, missing", selector, false, false},
		} {
			t.Run(tt.name, func(t *testing.T) {
				fd := &viewtest.Finder{Found: map[string]bool{wellknown.KindSecret + " app/db": tt.exists}}
				f := newFixture(t, Options{View: tt.view, Finder: fd})
				d := deployment(map[string]string{wellknown.Reload: "true", wellknown.ConfigInputs: "secret/db=1"}, false, "db")
				f.put(t, d)
				o := f.c.observe(t.Context(), key{Kind: "Deployment", Namespace: "app", Name: "web"}, mustGet(t, f), mustGet(t, f), digester{})
				if o.hidden["secret/db"] != tt.hidden {
					t.Errorf("hidden = %v, want %v", o.hidden["secret/db"], tt.hidden)
				}
			})
		}
	})
}

func mustGet(t *testing.T, f *fixture) any {
	t.Helper()
	obj, ok, err := f.inf.Workloads()["Deployment"].GetIndexer().GetByKey("app/web")
	if err != nil || !ok {
		t.Fatalf("app/web not in the cache: %v", err)
	}
	return obj
}
