package e2e

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What courier cannot see is not gone (#48): in the scoped modes, nothing
// is deleted, restored, adopted or taken over because it is missing from
// courier's cache unless courier would have seen it.

const scopeSelector = "--resource-label-selector=courier-scope=yes"

// pickUp is how long a namespace allowed again may take to be listed: each
// of its informers retries on client-go's backoff (up to 30 s, plus as much
// again of jitter), and a namespace's deletion waits for its contents.
const pickUp = 3 * time.Minute

// unlabel removes courier-scope from the Secret ns/name: it leaves the
// selector, and courier's watch sends a DELETED event for it.
func unlabel(t *testing.T, ns, name string) {
	t.Helper()
	updateSecret(t, ns, name, func(s *corev1.Secret) { delete(s.Labels, "courier-scope") })
}

// SPEC (--resource-label-selector): a source that leaves the selector keeps
// its replicas, through a leader change too (the new term's resync finds
// them without their source); once back in the selector it is a source again,
// and deleted inside the view its replicas go.
func TestASourceThatLeavesTheSelectorKeepsItsReplicas(t *testing.T) {
	tid := testID()
	src := newNamespace(t, "leave-src", nil)
	p1 := newNamespace(t, "leave-p1", map[string]string{"test": tid})
	p2 := newNamespace(t, "leave-p2", map[string]string{"test": tid})
	own := newNamespace(t, "courier-leave", nil)
	args := []string{"--namespace=" + own, "--source-namespaces=" + src, scopeSelector}
	cp := startCourier(t, args...)
	cp.WaitLeader(t.Context())
	createSecret(t, src, "db", withLabel("courier-scope", "yes"), withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v1"))
	want := map[string][]byte{"k": []byte("v1")}
	withinSpec(t, "replicas in p1 and p2", func(ctx context.Context) (bool, error) {
		a, err := secretIn(p1, "db", want)(ctx)
		b, err2 := secretIn(p2, "db", want)(ctx)
		return a && b, errors.Join(err, err2)
	})

	unlabel(t, src, "db")
	bothStay := func(ctx context.Context) (bool, error) {
		a, err := secretIn(p1, "db", want)(ctx)
		b, err2 := secretIn(p2, "db", want)(ctx)
		return a && b, errors.Join(err, err2)
	}
	consistently(t, quiet, "the replicas stay once their source left the selector", bothStay)
	eventually(t, converge, "courier says why it leaves them (an Event naming the selector)",
		eventWith(p1, "db", "SourceOutOfView", "--resource-label-selector"))

	// A leader change: the standby's first term resyncs every replica,
	// whose source it does not see.
	standby := startCourier(t, args...)
	cp.Stop()
	standby.WaitLeader(t.Context())
	consistently(t, quiet, "the replicas stay after a leader change", bothStay)
	cp = standby

	// Back in the selector: a source again; deleted inside the view: its
	// replicas go.
	updateSecret(t, src, "db", func(s *corev1.Secret) {
		s.Labels = map[string]string{"courier-scope": "yes"}
		s.Data["k"] = []byte("v2")
	})
	withinSpec(t, "the source back in the selector replicates again", secretIn(p2, "db", map[string][]byte{"k": []byte("v2")}))
	deleteSecret(t, src, "db")
	withinSpec(t, "a source deleted inside the view loses its replicas", secretsGone("db", p1, p2))
}

// SPEC (--watch-namespaces): a source in a namespace --source-namespaces
// allows (a glob) but --watch-namespaces does not list is never cached:
// its replicas in watched namespaces stay, through the first resync and
// every other; courier does not delete what it cannot check.
func TestASourceInAnUnwatchedNamespaceKeepsItsReplicas(t *testing.T) {
	tid := testID()
	src := newNamespace(t, "glob-src", nil)
	dst := newNamespace(t, "glob-dst", map[string]string{"test": tid})
	own := newNamespace(t, "courier-glob", nil)
	// Cluster-wide first: the replica is written.
	wide := startCourier(t, "--namespace="+own, "--source-namespaces=glob-*")
	wide.WaitLeader(t.Context())
	createSecret(t, src, "db", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v1"))
	want := map[string][]byte{"k": []byte("v1")}
	withinSpec(t, "replica in dst", secretIn(dst, "db", want))
	wide.Stop()

	// Narrowed: dst and courier's own namespace only; the glob still
	// allows src, which is no longer watched.
	id := scopedIdentity(t, "courier-glob-"+tid, scopedRules(t), dst, own)
	cp := startCourierAs(t, id, nil, "--namespace="+own, "--source-namespaces=glob-*", "--watch-namespaces="+dst)
	cp.WaitLeader(t.Context())
	consistently(t, quiet, "the replica of a source courier no longer watches stays", secretIn(dst, "db", want))
	eventually(t, converge, "courier says why it leaves it (an Event naming --watch-namespaces)",
		eventWith(dst, "db", "SourceOutOfView", "--watch-namespaces"))
	// Still guarded: an edit is not reverted (courier cannot read the
	// source), and nothing is deleted.
	if strings.Contains(cp.Logs(), `"op":"delete"`) {
		t.Errorf("courier deleted a replica:\n%s", linesWith(cp.Logs(), `"op":"delete"`))
	}
}

// SPEC (guard, --resource-label-selector): a protected source relabelled
// out of the selector leaves courier's protection: its backup is dropped,
// so when an admin then deletes it, courier does not bring it back, not even
// at its next start (which then finds it gone for good, by name, and
// deletes its replicas).
func TestAProtectedSourceThatLeavesTheSelectorIsNotRestored(t *testing.T) {
	tid := testID()
	src := newNamespace(t, "leavep-src", nil)
	dst := newNamespace(t, "leavep-dst", map[string]string{"test": tid})
	own := newNamespace(t, "courier-leavep", nil)
	args := []string{"--namespace=" + own, "--source-namespaces=" + src, scopeSelector}
	cp := startCourier(t, args...)
	cp.WaitLeader(t.Context())
	createSecret(t, src, "db", withLabel("courier-scope", "yes"), withLabel(keyProtect, "true"),
		withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v1"))
	want := map[string][]byte{"k": []byte("v1")}
	withinSpec(t, "replica", secretIn(dst, "db", want))
	backups := func(ctx context.Context) (int, error) {
		l, err := admin().CoreV1().Secrets(src).List(ctx, metav1.ListOptions{LabelSelector: "courier.dev/backup=true"})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}
	eventually(t, converge, "backup written", func(ctx context.Context) (bool, error) {
		n, err := backups(ctx)
		return n == 1, err
	})

	unlabel(t, src, "db")
	eventually(t, converge, "the backup of a source that left the view is dropped", func(ctx context.Context) (bool, error) {
		n, err := backups(ctx)
		return n == 0, err
	})
	deleteSecret(t, src, "db")
	cp.Stop()
	cp = startCourier(t, args...)
	cp.WaitLeader(t.Context())
	consistently(t, quiet, "the source an admin deleted outside the view is not restored", secretGone(src, "db"))
	// The source exists nowhere now (a read by name says so): its replica
	// goes, as for any deleted source.
	eventually(t, converge, "the replica of a source that exists nowhere is deleted", secretGone(dst, "db"))
	if n := eventCount(t, src, "db", "SourceRestored"); n > 0 {
		t.Errorf("%d SourceRestored Events for a source deleted outside courier's view", n)
	}
}

// SPEC (conflicts, --resource-label-selector): adoption never takes another
// source's replica. The older source owns dst/db and the younger one gets
// ReplicaConflict; with the selector on and only the younger one labelled,
// the younger one's create meets the older one's replica: it is left as it
// is, and the younger source is told why.
func TestAdoptionLeavesAnotherSourcesReplicaAlone(t *testing.T) {
	tid := testID()
	older := newNamespace(t, "adoptx-a", nil)
	younger := newNamespace(t, "adoptx-b", nil)
	dst := newNamespace(t, "adoptx-dst", map[string]string{"test": tid})
	own := newNamespace(t, "courier-adoptx", nil)
	args := []string{"--namespace=" + own, "--source-namespaces=" + older + "," + younger}
	before := startCourier(t, args...)
	before.WaitLeader(t.Context())
	createSecret(t, older, "db", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "older"))
	want := map[string][]byte{"k": []byte("older")}
	withinSpec(t, "the older source's replica", secretIn(dst, "db", want))
	createSecret(t, younger, "db", withLabel("courier-scope", "yes"), withAnnotation(keyReplicateTo, "test="+tid), withData("k", "younger"))
	eventually(t, converge, "the younger source is told the older wins", eventWith(younger, "db", "ReplicaConflict", older+"/db"))
	before.Stop()

	cp := startCourier(t, append(args, scopeSelector)...)
	cp.WaitLeader(t.Context())
	eventually(t, converge, "the younger source is told why its replica is not written",
		eventWith(younger, "db", "ReplicaConflict", "another source"))
	consistently(t, quiet, "the older source's replica is never overwritten", secretIn(dst, "db", want))
	if n := eventCount(t, dst, "db", "ReplicaReverted"); n > 0 {
		t.Errorf("%d ReplicaReverted Events on another source's replica", n)
	}
}

// SPEC (--watch-namespaces): a watched namespace courier may no longer list
// in (deleted, and its Role with it) holds nothing else up: a restarted
// courier becomes ready and leads, replicates and reverts in the other
// namespaces, reports the namespace in
// courier_watch_namespace_unavailable, and picks it up again once it is
// back with its Role.
func TestAWatchedNamespaceThatGoesAwayHoldsNothingElseUp(t *testing.T) {
	tid := testID()
	a := newNamespace(t, "away-a", nil)
	b := newNamespace(t, "away-b", map[string]string{"test": tid})
	c := newNamespace(t, "away-c", map[string]string{"test": tid})
	own := newNamespace(t, "courier-away", nil)
	rules := scopedRules(t)
	id := scopedIdentity(t, "courier-away-"+tid, rules, a, b, c, own)
	args := []string{"--namespace=" + own, "--watch-namespaces=" + a + "," + b + "," + c, "--source-namespaces=" + a}
	cp := startCourierAs(t, id, nil, args...)
	cp.WaitLeader(t.Context())
	createSecret(t, a, "db", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v1"))
	withinSpec(t, "replica in b", secretIn(b, "db", map[string][]byte{"k": []byte("v1")}))
	withinSpec(t, "replica in c", secretIn(c, "db", map[string][]byte{"k": []byte("v1")}))

	// b goes away, its Role with it; courier restarts.
	if err := admin().CoreV1().Namespaces().Delete(t.Context(), b, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, pickUp, "namespace b gone, its Role with it", func(ctx context.Context) (bool, error) {
		_, err := admin().CoreV1().Namespaces().Get(ctx, b, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	cp.Stop()
	cp = startCourierAs(t, id, nil, args...)
	cp.WaitReady(t.Context())
	cp.WaitLeader(t.Context())
	eventually(t, converge, "courier_watch_namespace_unavailable names b", func(ctx context.Context) (bool, error) {
		v, ok := cp.MetricValue(ctx, `courier_watch_namespace_unavailable{namespace="`+b+`"}`)
		return ok && v == 1, nil
	})
	updateSecret(t, a, "db", func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	withinSpec(t, "replication goes on in c", secretIn(c, "db", map[string][]byte{"k": []byte("v2")}))
	eventually(t, converge, "replica in c edited", editSecret(c, "db", "k", "edited"))
	withinSpec(t, "an edit in c is reverted", secretIn(c, "db", map[string][]byte{"k": []byte("v2")}))
	if l := linesWith(cp.Logs(), "courier may not list or watch in a namespace of --watch-namespaces"); !strings.Contains(l, b) {
		t.Errorf("the log never names %s as a namespace courier may not watch:\n%s", b, l)
	}

	// b is back, with its Role: picked up.
	recreateNamespace(t, b, map[string]string{"test": tid})
	scopedIdentity(t, id.sa, rules, b)
	eventually(t, pickUp, "the replica in b once it is back with its Role", secretIn(b, "db", map[string][]byte{"k": []byte("v2")}))
	eventually(t, pickUp, "courier_watch_namespace_unavailable clears b", func(ctx context.Context) (bool, error) {
		v, ok := cp.MetricValue(ctx, `courier_watch_namespace_unavailable{namespace="`+b+`"}`)
		return ok && v == 0, nil
	})
}

// recreateNamespace creates the namespace name again (deleted earlier in
// the test), removed when the test ends.
func recreateNamespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	eventually(t, converge, "namespace "+name+" created again", func(ctx context.Context) (bool, error) {
		_, err := admin().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	t.Cleanup(func() {
		_ = admin().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// SPEC (installations): installations that cannot see each other's digest
// keys (one with a selector the other's key does not carry) never fight
// over a workload: the one whose baseline it carries keeps it, and a
// change rolls it out once.
func TestInstallationsThatCannotSeeEachOtherDoNotFight(t *testing.T) {
	ns := newNamespace(t, "blind", nil)
	first := newNamespace(t, "courier-blind1", nil)
	second := newNamespace(t, "courier-blind2", nil)
	one := startCourier(t, "--namespace="+first, "--source-namespaces="+first, "--reload-debounce=100ms")
	one.WaitLeader(t.Context())
	createSecret(t, ns, "db", withLabel("courier-scope", "yes"), withData("k", "v1"))
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	n := settled(t, ns, "app")
	baselineOf := func(ctx context.Context) (string, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return "", err
		}
		return d.Annotations[keyInputs], nil
	}
	owned, err := baselineOf(t.Context())
	if err != nil || !strings.Contains(owned, "installation="+first) {
		t.Fatalf("baseline %q (%v), want it written by %s", owned, err, first)
	}
	two := startCourier(t, "--namespace="+second, "--source-namespaces="+second, "--reload-debounce=100ms", scopeSelector)
	two.WaitLeader(t.Context())
	consistently(t, quiet, "the baseline stays the first installation's", func(ctx context.Context) (bool, error) {
		b, err := baselineOf(ctx)
		return b == owned, err
	})
	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	rolledOutOnce(t, ns, "app", n, "secret/db")
	if b, err := baselineOf(t.Context()); err != nil || !strings.Contains(b, "installation="+first) {
		t.Errorf("after the change the baseline is %q (%v), want the first installation's", b, err)
	}
}

// SPEC (--resource-label-selector, turning it on): a baseline written
// before the selector names an input now outside it; that input does not
// freeze the workload: a change of a selected input rolls it out, and no
// InputMissing says an existing object is gone.
func TestTurningTheSelectorOnDoesNotFreezeWorkloads(t *testing.T) {
	ns := newNamespace(t, "freeze", nil)
	own := newNamespace(t, "courier-freeze", nil)
	args := []string{"--namespace=" + own, "--source-namespaces=" + own, "--reload-debounce=100ms"}
	before := startCourier(t, args...)
	before.WaitLeader(t.Context())
	createSecret(t, ns, "selected", withLabel("courier-scope", "yes"), withData("k", "1"))
	createSecret(t, ns, "other", withData("k", "1"))
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"},
		podSpec([]corev1.EnvVar{keyRef("secret", "selected", "k"), keyRef("secret", "other", "k")}, nil, nil))
	n := settled(t, ns, "app")
	before.Stop()

	cp := startCourier(t, append(args, scopeSelector)...)
	cp.WaitLeader(t.Context())
	updateSecret(t, ns, "selected", func(s *corev1.Secret) { s.Data["k"] = []byte("2") })
	rolledOutOnce(t, ns, "app", n, "secret/selected")
	if got := eventCount(t, ns, "app", "InputMissing"); got > 0 {
		t.Errorf("%d InputMissing Events for an input that exists outside the selector", got)
	}
}

// SPEC (pulls, installations): a scoped installation cannot see the other
// installations' digest keys, so a pull from a namespace outside its
// --source-namespaces may be another installation's to serve: it says
// nothing (no PullRefused) while the installation that serves it fills it.
func TestAScopedInstallationLeavesPullsItCannotServeToTheOthers(t *testing.T) {
	src := newNamespace(t, "pullx-src", nil)
	dst := newNamespace(t, "pullx-dst", nil)
	first := newNamespace(t, "courier-pullx1", nil)
	second := newNamespace(t, "courier-pullx2", nil)
	serving := startCourier(t, "--namespace="+first, "--source-namespaces="+src, "--compat=replicator")
	serving.WaitLeader(t.Context())
	scoped := startCourier(t, "--namespace="+second, "--source-namespaces="+second, "--compat=replicator", scopeSelector)
	scoped.WaitLeader(t.Context())
	createSecret(t, src, "db", withLabel("courier-scope", "yes"),
		withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"),
		withAnnotation("replicator.v1.mittwald.de/replication-allowed-namespaces", dst),
		withData("k", "v"))
	createSecret(t, dst, "db", withLabel("courier-scope", "yes"),
		withAnnotation("replicator.v1.mittwald.de/replicate-from", src+"/db"))
	eventually(t, converge, "the serving installation fills the pull", secretIn(dst, "db", map[string][]byte{"k": []byte("v")}))
	consistently(t, quiet, "the scoped installation says nothing of it", func(ctx context.Context) (bool, error) {
		evs, err := matchingEvents(ctx, dst, "db", "PullRefused", nil)
		return len(evs) == 0, err
	})
}

// docs/scoped.md (changing the scope): turning the selector off and
// widening --watch-namespaces picks up what was outside: a source that was
// not selected replicates, and a namespace newly watched gets its replicas.
func TestTurningTheSelectorOffPicksUpWhatWasOutside(t *testing.T) {
	tid := testID()
	src := newNamespace(t, "widen-src", nil)
	dst1 := newNamespace(t, "widen-d1", map[string]string{"test": tid})
	dst2 := newNamespace(t, "widen-d2", map[string]string{"test": tid})
	own := newNamespace(t, "courier-widen", nil)
	id := scopedIdentity(t, "courier-widen-"+tid, scopedRules(t), src, dst1, dst2, own)
	base := []string{"--namespace=" + own, "--source-namespaces=" + src}
	narrow := startCourierAs(t, id, nil, append(base, "--watch-namespaces="+src+","+dst1, scopeSelector)...)
	narrow.WaitLeader(t.Context())
	createSecret(t, src, "plain", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "p"))
	createSecret(t, src, "labelled", withLabel("courier-scope", "yes"), withAnnotation(keyReplicateTo, "test="+tid), withData("k", "l"))
	withinSpec(t, "the labelled source's replica in the watched namespace", secretIn(dst1, "labelled", map[string][]byte{"k": []byte("l")}))
	consistently(t, quiet, "nothing of the unselected source, nothing in the unwatched namespace", func(ctx context.Context) (bool, error) {
		a, err := secretGone(dst1, "plain")(ctx)
		b, err2 := secretsGone("labelled", dst2)(ctx)
		return a && b, errors.Join(err, err2)
	})
	narrow.Stop()

	wide := startCourierAs(t, id, nil, append(base, "--watch-namespaces="+src+","+dst1+","+dst2)...)
	wide.WaitLeader(t.Context())
	for _, ns := range []string{dst1, dst2} {
		eventually(t, converge, "the source that was outside the selector replicates into "+ns, secretIn(ns, "plain", map[string][]byte{"k": []byte("p")}))
	}
	eventually(t, converge, "the namespace newly watched gets the labelled source's replica", secretIn(dst2, "labelled", map[string][]byte{"k": []byte("l")}))
	updateSecret(t, src, "labelled", func(s *corev1.Secret) { s.Data["k"] = []byte("l2") })
	withinSpec(t, "the replica written under the selector is kept equal to its source", secretIn(dst1, "labelled", map[string][]byte{"k": []byte("l2")}))
}
