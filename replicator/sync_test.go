package replicator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/view/viewtest"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func TestParseSelector(t *testing.T) {
	tests := []struct {
		in      string
		labels  map[string]string
		match   bool
		invalid bool
	}{
		{"*", map[string]string{"a": "b"}, true, false},
		{"  ", nil, true, false},
		{"env in (prod,staging),team!=legacy", map[string]string{"env": "prod"}, true, false},
		{"env in (prod,staging),team!=legacy", map[string]string{"env": "prod", "team": "legacy"}, false, false},
		{"kubernetes.io/metadata.name in (a,b)", map[string]string{wellknown.NamespaceName: "b"}, true, false},
		{"env in (prod", nil, false, true},
		{"=x", nil, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			sel, err := source.ParseSelector(tt.in)
			if (err != nil) != tt.invalid {
				t.Fatalf("err = %v, want invalid=%v", err, tt.invalid)
			}
			if err == nil && sel.Matches(labelSet(tt.labels)) != tt.match {
				t.Errorf("Matches(%v) = %v, want %v", tt.labels, !tt.match, tt.match)
			}
		})
	}
}

func TestEligible(t *testing.T) {
	now := metav1.Now()
	exclude := globs.List{"sandbox-*"}
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want bool
	}{
		{"ordinary", ns("team-a", nil), true},
		{"source's own", ns("platform", nil), false},
		{"kube-system", ns("kube-system", nil), false},
		{"kube-public", ns("kube-public", nil), false},
		{"kube-node-lease", ns("kube-node-lease", nil), false},
		{"excluded glob", ns("sandbox-1", nil), false},
		{"replication disabled", ns("team-b", map[string]string{wellknown.Replication: "disabled"}), false},
		{"being deleted", func() *corev1.Namespace { n := ns("team-c", nil); n.DeletionTimestamp = &now; return n }(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := replica.Eligible(namespaces.From(tt.ns), "platform", exclude); got != tt.want {
				t.Errorf("eligible = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestTampered: every courier label and annotation on a replica is guarded
// like content, courier.dev/via and courier.dev/copied-metadata included; a
// replica stamped before those were (the content hash alone) is taken as it
// is.
func TestTampered(t *testing.T) {
	plain := replica.Want{Hash: "h1"}
	compat := replica.Want{Hash: "h1", Via: "replicator.v1.mittwald.de/replicate-to",
		Copied: source.Record{Labels: map[string]string{"team": "a"}}}
	tests := []struct {
		name   string
		want   replica.Want
		change func(*corev1.Secret)
		tamper bool
	}{
		{"untouched", plain, func(*corev1.Secret) {}, false},
		{"hash differs", plain, func(s *corev1.Secret) { s.Annotations[wellknown.ContentHash] = "x" }, true},
		{"source annotation edited", plain, func(s *corev1.Secret) { s.Annotations[wellknown.Source] = "q/s" }, true},
		{"managed-by removed", plain, func(s *corev1.Secret) { delete(s.Labels, wellknown.ManagedBy) }, true},
		{"replica label removed", plain, func(s *corev1.Secret) { delete(s.Labels, wellknown.Replica) }, true},
		{"foreign label added", plain, func(s *corev1.Secret) { s.Labels["team"] = "a" }, false},
		{"via and copied metadata untouched", compat, func(*corev1.Secret) {}, false},
		{"via removed", compat, func(s *corev1.Secret) { delete(s.Annotations, wellknown.Via) }, true},
		{"via edited", compat, func(s *corev1.Secret) { s.Annotations[wellknown.Via] = "x" }, true},
		{"copied-metadata emptied", compat, func(s *corev1.Secret) { s.Annotations[wellknown.CopiedMetadata] = "{}" }, true},
		{"copied-metadata removed", compat, func(s *corev1.Secret) { delete(s.Annotations, wellknown.CopiedMetadata) }, true},
		{"stamped before via was (content hash alone)", compat, func(s *corev1.Secret) { s.Annotations[wellknown.ContentHash] = "h1" }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &corev1.Secret{ObjectMeta: replicaMeta(&metav1.ObjectMeta{Namespace: "p", Name: "s"}, "t", testInstallation, "", "", tt.want, nil)}
			tt.change(s)
			if got := replica.Tampered(s, "h1", "p/s"); got != tt.tamper {
				t.Errorf("Tampered = %v, want %v", got, tt.tamper)
			}
		})
	}
}

// fixture is a replicator on a fake clientset whose informer indexers are
// filled directly.
type fixture struct {
	t      *testing.T
	client *fake.Clientset
	inf    *informers.Set
	c      *Controller
	clock  *testingclock.FakeClock
}

func newFixture(t *testing.T, objs ...runtime.Object) *fixture {
	t.Helper()
	return newFixtureWith(t, nil, objs...)
}

// newFixtureWith is newFixture with the Options changed by opts (if set).
func newFixtureWith(t *testing.T, opts func(*Options), objs ...runtime.Object) *fixture {
	t.Helper()
	client := fake.NewClientset(objs...)
	sources := globs.List{"platform*"}
	inf, err := informers.New(client, nil, role.Config{Allowed: sources.Match, Namespace: "courier"}, informers.Scope{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	clk := testingclock.NewFakeClock(time.Unix(1000, 0))
	o := Options{Installation: testInstallation, SourceNamespaces: sources, Workers: 1, Clock: clk}
	if opts != nil {
		opts(&o)
	}
	c, err := New(client, inf.Secrets.Informer(), inf.ConfigMaps.Informer(), inf.Namespaces.Informer(),
		record.NewFakeRecorder(100), prometheus.NewRegistry(), zap.NewNop(), o)
	if err != nil {
		t.Fatal(err)
	}
	transform := informers.Transform(informers.SourcesIn(role.Config{Allowed: sources.Match, Namespace: "courier"}), nil)
	for _, o := range objs {
		o, _ := transform(o.DeepCopyObject())
		var err error
		switch x := o.(type) {
		case *corev1.Secret:
			err = inf.Secrets.Informer().GetIndexer().Add(x)
		case *corev1.ConfigMap:
			err = inf.ConfigMaps.Informer().GetIndexer().Add(x)
		case *namespaces.Namespace:
			err = inf.Namespaces.Informer().GetIndexer().Add(x)
		case *content.Digested:
			if x.GetObjectKind().GroupVersionKind().Kind == wellknown.KindSecret {
				err = inf.Secrets.Informer().GetIndexer().Add(x)
			} else {
				err = inf.ConfigMaps.Informer().GetIndexer().Add(x)
			}
		default:
			t.Fatalf("the fixture cannot hold a %T", o)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{t: t, client: client, inf: inf, c: c, clock: clk}
}

// writes returns the verbs and namespaces of the fake client's write
// actions (the fake's own seeding is not an action).
func (f *fixture) writes() []string {
	var out []string
	for _, a := range f.client.Actions() {
		switch a.GetVerb() {
		case "create", "update", "delete", "patch":
			out = append(out, a.GetVerb()+" "+a.GetNamespace())
		}
	}
	return out
}

func sourceSecret(selector string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "platform", UID: "src-uid", ResourceVersion: "1",
			Annotations: map[string]string{wellknown.ReplicateTo: selector}, CreationTimestamp: metav1.NewTime(time.Unix(100, 0))},
		Type: corev1.SecretTypeOpaque, Data: map[string][]byte{},
	}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func replicaOf(src *corev1.Secret, target string) *corev1.Secret {
	var entries = content.Entries(src)
	return &corev1.Secret{
		ObjectMeta: replicaMeta(src, target, testInstallation, "", "", replica.Want{Hash: content.Hash(entries)}, &metav1.ObjectMeta{UID: "r-uid", ResourceVersion: "7"}),
		Type:       src.Type, Data: src.Data,
	}
}

func ns(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pair(target string) key {
	return key{Kind: kindSecret, Namespace: "platform", Name: "db", Target: target}
}

func TestSyncPair(t *testing.T) {
	src := sourceSecret("env=prod", map[string]string{"k": "v"})
	prod, dev := ns("prod", map[string]string{"env": "prod"}), ns("dev", map[string]string{"env": "dev"})
	stale := replicaOf(sourceSecret("env=prod", map[string]string{"k": "old"}), "prod")
	tamperedReplica := replicaOf(src, "prod")
	tamperedReplica.Data = map[string][]byte{"k": []byte("edited")}
	unmanaged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}, Data: map[string][]byte{"x": nil}}
	immutableSrc := sourceSecret("env=prod", map[string]string{"k": "v"})
	immutableSrc.Immutable = ptrTo(true)

	tests := []struct {
		name   string
		objs   []runtime.Object
		target string
		want   []string
	}{
		{"missing replica is created", []runtime.Object{src, prod}, "prod", []string{"create prod"}},
		{"replica in sync: no write", []runtime.Object{src, prod, replicaOf(src, "prod")}, "prod", nil},
		{"stale replica is updated", []runtime.Object{src, prod, stale}, "prod", []string{"update prod"}},
		{"tampered replica is reverted", []runtime.Object{src, prod, tamperedReplica}, "prod", []string{"update prod"}},
		{"no longer matching: deleted", []runtime.Object{src, dev, replicaOf(src, "dev")}, "dev", []string{"delete dev"}},
		{"not matching, nothing there: no write", []runtime.Object{src, dev}, "dev", nil},
		{"unmanaged object: never touched", []runtime.Object{src, prod, unmanaged}, "prod", nil},
		{"source gone: replica deleted", []runtime.Object{prod, replicaOf(src, "prod")}, "prod", []string{"delete prod"}},
		{"invalid selector: replica kept", []runtime.Object{sourceSecret("env in (", map[string]string{"k": "v"}), prod, replicaOf(src, "prod")}, "prod", nil},
		{"namespace gone: nothing", []runtime.Object{src}, "prod", nil},
		{"immutable changed: recreated", []runtime.Object{immutableSrc, prod, replicaOf(src, "prod")}, "prod", []string{"delete prod", "create prod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, tt.objs...)
			if err := f.c.syncPair(t.Context(), pair(tt.target)); err != nil {
				t.Fatalf("syncPair: %v", err)
			}
			if diff := cmp.Diff(tt.want, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSyncPairWritesTheSourceContentWithoutCacheMarkers(t *testing.T) {
	src := sourceSecret("*", map[string]string{"k": "v"})
	old := replicaOf(sourceSecret("*", map[string]string{"k": "old"}), "prod")
	old.Labels["team"] = "kept"
	f := newFixture(t, src, ns("prod", nil), old)
	if err := f.c.syncPair(t.Context(), pair("prod")); err != nil {
		t.Fatal(err)
	}
	var got *corev1.Secret
	for _, a := range f.client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok {
			got = u.GetObject().(*corev1.Secret)
		}
	}
	if got == nil {
		t.Fatal("no update")
	}
	want := replicaOf(src, "prod")
	want.Labels["team"] = "kept"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("written replica (-want +got):\n%s", diff)
	}
}

func labelSet(m map[string]string) labels.Set { return labels.Set(m) }

func ptrTo[T any](v T) *T { return &v }

func TestForgedSourceAnnotationDoesNotDeleteALiveSourcesReplica(t *testing.T) {
	src := sourceSecret("*", map[string]string{"k": "v"})
	forged := replicaOf(src, "prod")
	forged.Annotations[wellknown.Source] = "platform2/db" // names a source that does not exist
	f := newFixture(t, src, ns("prod", nil), forged)

	gone := key{Kind: kindSecret, Namespace: "platform2", Name: "db", Target: "prod"}
	if err := f.c.syncPair(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); got != nil {
		t.Errorf("the forged owner's pair wrote %v, want nothing", got)
	}
	if err := f.c.syncPair(t.Context(), pair("prod")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"update prod"}, f.writes()); diff != "" {
		t.Errorf("the live source's pair (-want +got):\n%s", diff)
	}
}

func TestDeletedNamespaceDropsItsReplicaState(t *testing.T) {
	src := sourceSecret("*", map[string]string{"k": "v"})
	f := newFixture(t, src, ns("prod", nil), replicaOf(src, "prod"))
	if err := f.c.syncPair(t.Context(), pair("prod")); err != nil {
		t.Fatal(err)
	}
	if got := f.c.states.counts()[[2]string{kindSecret, StateInSync}]; got != 1 {
		t.Fatalf("in_sync = %d before the namespace goes, want 1", got)
	}
	if err := f.inf.Namespaces.Informer().GetIndexer().Delete(ns("prod", nil)); err != nil {
		t.Fatal(err)
	}
	if err := f.c.syncPair(t.Context(), pair("prod")); err != nil {
		t.Fatal(err)
	}
	if got := f.c.states.counts(); len(got) != 0 {
		t.Errorf("states after the namespace was deleted = %v, want none", got)
	}
}

func TestConflictMessageNamesEveryNamespaceUpToTheLimit(t *testing.T) {
	sk := key{Kind: kindSecret, Namespace: "platform", Name: "db"}
	got := conflictMessage(sk, map[string]string{"b": "the older source x/db wins", "a": "Secret a/db exists and was not created by courier; it is left untouched"})
	for _, want := range []string{"platform/db", "2 namespace(s)", "a (Secret a/db exists", "b (the older source x/db wins)", wellknown.ReplicateTo} {
		if !strings.Contains(got, want) {
			t.Errorf("message %q lacks %q", got, want)
		}
	}
	if strings.Index(got, "a (") > strings.Index(got, "b (") {
		t.Errorf("namespaces not sorted: %q", got)
	}
	many := map[string]string{}
	for i := range 25 {
		many[fmt.Sprintf("ns-%02d", i)] = "taken"
	}
	got = conflictMessage(sk, many)
	if !strings.Contains(got, "25 namespace(s)") || !strings.Contains(got, "ns-09 (taken), and 15 more") || strings.Contains(got, "ns-10") {
		t.Errorf("long message not bounded as expected: %q", got)
	}
}

func TestConflictsAcrossNamespacesGiveOneEvent(t *testing.T) {
	src := sourceSecret("*", map[string]string{"k": "v"})
	objs := []runtime.Object{src}
	for _, n := range []string{"a", "b", "c"} {
		objs = append(objs, ns(n, nil), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: n}})
	}
	f := newFixture(t, objs...)
	for _, n := range []string{"a", "b", "c"} {
		if err := f.c.syncPair(t.Context(), pair(n)); err != nil {
			t.Fatal(err)
		}
	}
	rec := f.c.recorder.(*record.FakeRecorder)
	select {
	case e := <-rec.Events:
		if !strings.Contains(e, "ReplicaConflict") || !strings.Contains(e, "3 namespace(s)") {
			t.Errorf("event %q, want one ReplicaConflict naming 3 namespaces", e)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no ReplicaConflict event")
	}
	select {
	case e := <-rec.Events:
		t.Errorf("a second event: %q", e)
	case <-time.After(2 * conflictWindow):
	}
}

func TestFlappingNamespaceWaitsForItsLabelsToHoldStill(t *testing.T) {
	src := sourceSecret("env=prod", map[string]string{"k": "v"})
	on, off := ns("prod", map[string]string{"env": "prod"}), ns("prod", nil)
	f := newFixture(t, src, on)
	step := f.clock.Step

	f.c.onNamespaceUpdate(off, on) // a single change is acted on at once
	if err := f.c.syncPair(t.Context(), pair("prod")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"create prod"}, f.writes()); diff != "" {
		t.Fatalf("after one label change (-want +got):\n%s", diff)
	}

	f.client.ClearActions()
	if err := f.inf.Namespaces.Informer().GetIndexer().Update(off); err != nil {
		t.Fatal(err)
	}
	if err := f.inf.Secrets.Informer().GetIndexer().Add(replicaOf(src, "prod")); err != nil {
		t.Fatal(err)
	}
	step(100 * time.Millisecond)
	f.c.onNamespaceUpdate(on, off) // within flapWindow of the last: flapping
	step(flapSettle - time.Millisecond)
	if err := f.c.syncPair(t.Context(), pair("prod")); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); len(got) != 0 {
		t.Fatalf("wrote %v while the labels were flapping", got)
	}
	step(time.Millisecond) // held still for flapSettle
	if err := f.c.syncPair(t.Context(), pair("prod")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"delete prod"}, f.writes()); diff != "" {
		t.Errorf("once the labels held still (-want +got):\n%s", diff)
	}

	step(flapWindow) // a change after a quiet second is acted on at once again
	f.c.onNamespaceUpdate(off, on)
	if d := f.c.flapHold("prod"); d != 0 {
		t.Errorf("hold after a quiet second = %s, want 0", d)
	}
}

func TestSyncPairReplicatesAConfigMap(t *testing.T) {
	src := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "platform", UID: "cm-uid", ResourceVersion: "1",
			Annotations: map[string]string{wellknown.ReplicateTo: "*"}},
		Data:       map[string]string{"a": "alpha"},
		BinaryData: map[string][]byte{"b": {0, 1}},
	}
	f := newFixture(t, src, ns("prod", nil))
	if err := f.c.syncPair(t.Context(), key{Kind: kindConfigMap, Namespace: "platform", Name: "cfg", Target: "prod"}); err != nil {
		t.Fatal(err)
	}
	var got *corev1.ConfigMap
	for _, a := range f.client.Actions() {
		if c, ok := a.(k8stesting.CreateAction); ok {
			got = c.GetObject().(*corev1.ConfigMap)
		}
	}
	if got == nil {
		t.Fatalf("no ConfigMap created; writes %v", f.writes())
	}
	hash := content.Hash(content.Entries(src))
	want := &corev1.ConfigMap{ObjectMeta: replicaMeta(src, "prod", testInstallation, "", "", replica.Want{Hash: hash}, nil), Data: src.Data, BinaryData: src.BinaryData}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("created replica (-want +got):\n%s", diff)
	}
}

func TestAnOlderSourceWithAnInvalidSelectorKeepsItsReplica(t *testing.T) {
	older := sourceSecret("env in (", map[string]string{"k": "v"}) // invalid, created at 100
	younger := sourceSecret("*", map[string]string{"k": "other"})
	younger.Namespace, younger.UID, younger.CreationTimestamp = "platform2", "y-uid", metav1.NewTime(time.Unix(200, 0))
	f := newFixture(t, older, younger, ns("prod", nil), replicaOf(sourceSecret("*", map[string]string{"k": "v"}), "prod"))
	k := key{Kind: kindSecret, Namespace: "platform2", Name: "db", Target: "prod"}
	if err := f.c.syncPair(t.Context(), k); err != nil {
		t.Fatal(err)
	}
	if got := f.writes(); got != nil {
		t.Errorf("the younger source wrote %v over the older's replica", got)
	}
	if got := f.c.states.counts()[[2]string{kindSecret, StateConflict}]; got != 1 {
		t.Errorf("conflicts = %d, want 1", got)
	}
}

// Every call site of the replicator that acts on a source's absence from
// the cache — deleting its replica, taking another source's replica over —
// acts only when the view says the absence is inside it (#48).
func TestASourceMissingFromTheCacheIsActedOnOnlyInsideTheView(t *testing.T) {
	src := sourceSecret("*", map[string]string{"k": "v"})
	older := sourceSecret("*", map[string]string{"k": "older"})
	older.Namespace = "platform-old"
	mustView := func(namespaces []string, sel string) view.View { return viewtest.View(t, namespaces, sel) }
	tests := []struct {
		name      string
		view      view.View
		exists    bool // the source exists in the API server (outside the view)
		objs      []runtime.Object
		sync      key
		want      []string
		reads     int
		outOfView bool // a SourceOutOfView Event on the replica
	}{
		{name: "cluster-wide: a missing source is gone, its replica deleted",
			objs: []runtime.Object{ns("prod", nil), replicaOf(src, "prod")}, sync: pair("prod"), want: []string{"delete prod"}},
		{name: "selector: the source left it (found by name): replica kept",
			view: mustView(nil, "courier-scope=yes"), exists: true,
			objs: []runtime.Object{ns("prod", nil), replicaOf(src, "prod")}, sync: pair("prod"), reads: 1, outOfView: true},
		{name: "selector: the source was deleted (not found by name): replica deleted",
			view: mustView(nil, "courier-scope=yes"),
			objs: []runtime.Object{ns("prod", nil), replicaOf(src, "prod")}, sync: pair("prod"), want: []string{"delete prod"}, reads: 1},
		{name: "watch-namespaces: the source's namespace is not watched: replica kept, nothing read",
			view: mustView([]string{"prod"}, ""),
			objs: []runtime.Object{ns("prod", nil), replicaOf(src, "prod")}, sync: pair("prod"), outOfView: true},
		{name: "selector: a replica of an older source that left the view is not taken over",
			view: mustView(nil, "courier-scope=yes"), exists: true,
			objs: []runtime.Object{src, ns("prod", nil), replicaOf(older, "prod")}, sync: pair("prod"), reads: 1},
		{name: "selector: a replica of a source that is in the cache but no longer a source is taken over, nothing read",
			view: mustView(nil, "courier-scope=yes"), exists: true,
			objs: []runtime.Object{src, ns("prod", nil), replicaOf(older, "prod"), func() runtime.Object {
				retired := older.DeepCopy()
				retired.Annotations = nil
				return retired
			}()}, sync: pair("prod"), want: []string{"update prod"}},
		{name: "cluster-wide: a replica of a source that is gone is taken over",
			objs: []runtime.Object{src, ns("prod", nil), replicaOf(older, "prod")}, sync: pair("prod"), want: []string{"update prod"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fd := &viewtest.Finder{Found: map[string]bool{}}
			if tt.exists {
				fd.Found["Secret platform/db"], fd.Found["Secret platform-old/db"] = true, true
			}
			f := newFixtureWith(t, func(o *Options) { o.View, o.Finder = tt.view, fd }, tt.objs...)
			if err := f.c.syncPair(t.Context(), tt.sync); err != nil {
				t.Fatalf("syncPair: %v", err)
			}
			if diff := cmp.Diff(tt.want, f.writes()); diff != "" {
				t.Errorf("writes (-want +got):\n%s", diff)
			}
			if fd.Reads != tt.reads {
				t.Errorf("%d reads by name, want %d", fd.Reads, tt.reads)
			}
			events := drain(f.c.recorder.(*record.FakeRecorder).Events)
			if got := strings.Contains(events, wellknown.ReasonSourceOutOfView); got != tt.outOfView {
				t.Errorf("SourceOutOfView Event: %v, want %v (events: %q)", got, tt.outOfView, events)
			}
			if tt.outOfView {
				// Said once: a second sync says nothing again.
				if err := f.c.syncPair(t.Context(), tt.sync); err != nil {
					t.Fatal(err)
				}
				if again := drain(f.c.recorder.(*record.FakeRecorder).Events); again != "" {
					t.Errorf("a second sync told again: %q", again)
				}
			}
		})
	}
}

func drain(ch chan string) string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return strings.Join(out, "\n")
		}
	}
}

// A target namespace courier's caches cannot speak for now (its lists
// refused, or not listed again yet) gets no write, and its pair is retried
// quietly: a replica missing from that cache may well be there.
func TestAPairIntoAnUnavailableNamespaceWaits(t *testing.T) {
	src := sourceSecret("*", map[string]string{"k": "v"})
	v, err := view.New([]string{"platform", "prod"}, "", func(ns string) bool { return ns == "prod" })
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, func(o *Options) { o.View = v }, src, ns("prod", nil))
	err = f.c.syncPair(t.Context(), pair("prod"))
	if !isQuiet(err) || err == nil {
		t.Errorf("syncPair = %v, want a quiet error that retries", err)
	}
	if got := f.writes(); got != nil {
		t.Errorf("wrote %v into an unavailable namespace", got)
	}
}
