package reloader

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// TestPreviewTellsWhatSyncWouldDo asks the preview about app/web over
// objects as status reads them (typed, in full), with the baseline a real
// first sync wrote, and checks its verdict against what sync then does.
func TestPreviewTellsWhatSyncWouldDo(t *testing.T) {
	key := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "courier", Name: KeySecret,
		Labels: map[string]string{wellknown.DigestKey: "true"}}, Data: map[string][]byte{"key": make([]byte, 32)}}
	// The baselines another installation wrote, by row.
	wroteBy := map[string]string{"another installation's": "other", "a gone installation's": "other"}
	// Another installation's key, as status reads it: metadata only.
	otherKey := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: KeySecret, Labels: map[string]string{wellknown.DigestKey: "true"}}}
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "platform", Name: "db", Annotations: map[string]string{wellknown.Reload: "true", wellknown.ReplicateTo: ""}},
		Data: map[string][]byte{"k": []byte("v1")}}
	replicaOf := secret("db", "v1", map[string]string{wellknown.Source: "platform/db"})
	// A Rollout taking app/web's pod template, as status reads it.
	rollout, err := workload.ObjectOf(workload.Custom{Resource: workload.Resource{GroupResource: workload.Rollouts}, Version: "v1alpha1", Kind: "Rollout"},
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
			"metadata": map[string]any{"namespace": "app", "name": "roll"},
			"spec":     map[string]any{"workloadRef": map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}}}})
	if err != nil {
		t.Fatal(err)
	}
	recently := fixtureNow.Add(-time.Minute).Format(time.RFC3339)
	for _, tc := range []struct {
		name        string
		annotations map[string]string // of the Deployment
		baselined   bool              // a first sync wrote its baseline (with db at v1)
		objects     []runtime.Object  // besides the Deployment
		opts        Options
		want        Explanation
		patches     int // what sync then sends (a notification records the change told)
	}{
		{"not opted in", nil, false, []runtime.Object{key, secret("db", "v1", nil)}, Options{},
			Explanation{Verdict: VerdictNotOptedIn, Policy: "compared", Message: `no input is opted in: annotate it courier.dev/reload: "true", name inputs in courier.dev/reload-on, or annotate an input courier.dev/reload: "true"`}, 0},
		{"first sight", map[string]string{wellknown.Reload: "true"}, false, []runtime.Object{key, secret("db", "v1", nil)}, Options{},
			Explanation{Verdict: VerdictRecords, Policy: "compared", Message: "first sight: courier records what it consumes and rolls nothing out; a later change rolls it out"}, 1},
		{"up to date", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{key, secret("db", "v1", nil)}, Options{},
			Explanation{Verdict: VerdictUpToDate, Policy: "compared", Message: "its pods run what it consumes now"}, 0},
		{"changed", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{key, secret("db", "v2", nil)}, Options{},
			Explanation{Verdict: VerdictRollsOut, Policy: "roll out", Message: "secret/db changed since its pods were given their content"}, 1},
		{"notify only", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{key, secret("db", "v2", nil)}, Options{NotifyOnly: true},
			Explanation{Verdict: VerdictNotifies, Policy: "notify only", Message: "secret/db changed: courier tells of the rollout and makes none (--reload-mode=notify)"}, 1},
		{"gone", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{key}, Options{},
			Explanation{Verdict: VerdictHeld, Policy: "compared", Message: "secret/db is gone: nothing rolls out until it is back"}, 0},
		{"no digest key", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{secret("db", "v2", nil)}, Options{},
			Explanation{Verdict: VerdictCannotTell, Policy: "no digest key", Message: "the digest key courier/courier-digest-key is not there yet"}, -1},
		{"another installation's", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{key, otherKey, secret("db", "v2", nil)}, Options{},
			Explanation{Verdict: VerdictElsewhere, Policy: "another installation's", Message: "its baseline was written by the courier installation in namespace other, which reloads it"}, 0},
		{"a gone installation's", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{key, secret("db", "v2", nil)}, Options{},
			Explanation{Verdict: VerdictRecords, Policy: "compared", Message: "first sight: courier records what it consumes and rolls nothing out; a later change rolls it out"}, 1},
		{"opted in by the source of its replica", nil, false, []runtime.Object{key, replicaOf, source}, Options{},
			Explanation{Verdict: VerdictRecords, Policy: "compared", Message: "first sight: courier records what it consumes and rolls nothing out; a later change rolls it out"}, 1},
		{"behind a Rollout", map[string]string{wellknown.Reload: "true"}, true, []runtime.Object{key, secret("db", "v2", nil), rollout}, Options{},
			Explanation{Verdict: VerdictNothingToDo, Policy: "pod template reloaded through a Rollout", Message: "its pod template is reloaded through the Argo Rollout that takes it (spec.workloadRef)"}, -1},
		{"minimum interval", map[string]string{wellknown.Reload: "true", wellknown.ReloadMinInterval: "1h", wellknown.ReloadedAt: recently}, true,
			[]runtime.Object{key, secret("db", "v2", nil)}, Options{},
			Explanation{Verdict: VerdictHeld, Policy: "minimum interval"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := deployment(tc.annotations, false, "db")
			if tc.baselined {
				first := newFixture(t, Options{}, secret("db", "v1", nil), d).sync(t)
				recorded := first[0][wellknown.ConfigInputs]
				if other := wroteBy[tc.name]; other != "" {
					recorded = strings.Replace(recorded, "installation=courier", "installation="+other, 1)
				}
				metav1.SetMetaDataAnnotation(&d.ObjectMeta, wellknown.ConfigInputs, recorded)
			}
			objects := append(tc.objects, d)
			o := tc.opts
			o.Namespace, o.Clock = "courier", testingclock.NewFakeClock(fixtureNow)
			p, err := NewPreview(o, role.Config{Namespace: "courier"}, objects)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Explain(t.Context(), workload.Deployment, "app", "web")
			if err != nil {
				t.Fatal(err)
			}
			if tc.want.Message == "" { // the minimum interval's: the Event's
				if want := "rolls out at 2026-11-23T07:59:00Z, once"; !strings.Contains(got.Message, want) {
					t.Errorf("message %q lacks %q", got.Message, want)
				}
				got.Message = ""
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("preview (-want +got):\n%s", diff)
			}
			if tc.patches < 0 {
				return // the fixture always holds the key, and no custom kind
			}
			f := newFixture(t, tc.opts, objects...)
			if patches := f.sync(t); len(patches) != tc.patches {
				t.Errorf("sync then sent %d patches (%v), the preview's verdict wants %d", len(patches), patches, tc.patches)
			}
		})
	}
}

// TestExplain tells each verdict the preview cannot reach over objects
// alone (they need a running courier's state) or that the row above does
// not: a row per verdict.
func TestExplain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*facts)
		want   Explanation
	}{
		{"waiting for replication", func(f *facts) { f.replicating = true },
			Explanation{Verdict: VerdictWaits, Policy: "waiting for replication", Message: "a change waits for the replicator to finish its writes"}},
		{"a Job to create again", func(f *facts) { f.key.Kind, f.pendingJob = workload.Job, true },
			Explanation{Verdict: VerdictRecreatesJob, Policy: "Job to create again", Message: "it was deleted to be recreated and is created again"}},
		{"through a Rollout", func(f *facts) { f.rolloutOwned = true },
			Explanation{Verdict: VerdictNothingToDo, Policy: "pod template reloaded through a Rollout", Message: "its pod template is reloaded through the Argo Rollout that takes it (spec.workloadRef)"}},
		{"another installation's", func(f *facts) { f.otherInstallation, f.recorded = true, "installation=other,secret/a=1" },
			Explanation{Verdict: VerdictElsewhere, Policy: "another installation's", Message: "its baseline was written by the courier installation in namespace other, which reloads it"}},
		{"debounce", func(f *facts) { f.seen, f.debounceWait = time.Time{}, time.Second },
			Explanation{Verdict: VerdictWaits, Policy: "debounce", Message: "the debounce window of its inputs' changes ends in 1s"}},
		{"own rollout", func(f *facts) { f.templateChanged = true },
			Explanation{Verdict: VerdictRecords, Policy: "own rollout", Message: "its pod template changed after its inputs did: its own rollout gives the new pods the new content"}},
		{"opted out", func(f *facts) { f.observed.optional, f.observed.now = map[string]bool{}, baseline{} },
			Explanation{Verdict: VerdictDrops, Policy: "compared", Message: "nothing it consumes is opted in any more"}},
		{"a Job being deleted", func(f *facts) { f.key.Kind, f.job.deleting = workload.Job, true },
			Explanation{Verdict: VerdictNothingToDo, Policy: "Job", Message: "the Job is being deleted"}},
		{"a finished Job", func(f *facts) { f.key.Kind, f.job.finished = workload.Job, true },
			Explanation{Verdict: VerdictHeld, Policy: "Job", Message: `secret/a changed, but this Job has finished, so courier does not recreate it (that would run it again); annotate it courier.dev/reload-finished: "true" to have it recreated for such changes`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := changedFacts()
			tc.change(f)
			if diff := cmp.Diff(tc.want, explain(f, verdictOf(f))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
