package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/courier-k8s/courier/internal/migrate"
)

// Tests of where features meet on one object (issue #29): each combination
// below was once a defect that no test of a single feature could see.

// backupIn waits for the backup of name in ns to hold data, with type typ.
func backupIn(ns, name string, typ corev1.SecretType, data map[string][]byte) func(context.Context) (bool, error) {
	return secretWhere(ns, "courier-backup."+name, func(b *corev1.Secret) bool { return b.Type == typ && equalData(b.Data, data) })
}

// SPEC (--compat): an object that both pulls and is a source (pushes, or is
// protected) is taken as a source and its pull is refused: its replicas and
// its backup stay, and it is still restored when deleted.
func TestASourceThatAlsoPullsStaysASource(t *testing.T) {
	s := setupReplication(t)
	a, b := s.target(t, "a", nil), s.target(t, "b", nil)
	data := map[string][]byte{"password": []byte("p1")}
	createSecret(t, s.src, "db", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id),
		withAnnotation("reflector.v1.k8s.emberstack.com/reflects", "elsewhere/db"), withData("password", "p1"))
	createSecret(t, s.src, "plain", withAnnotation(keyReplicateTo, "test="+s.id),
		withAnnotation("replicator.v1.mittwald.de/replicate-from", "elsewhere/plain"), withData("k", "v"))
	for _, ns := range []string{a, b} {
		eventually(t, converge, "replica of db in "+ns, secretIn(ns, "db", data))
		eventually(t, converge, "replica of plain in "+ns, secretIn(ns, "plain", map[string][]byte{"k": []byte("v")}))
	}
	eventually(t, converge, "backup", backupIn(s.src, "db", corev1.SecretTypeOpaque, data))
	deleted := map[string]func() bool{}
	for _, ref := range []struct{ ns, name string }{{a, "db"}, {b, "db"}, {a, "plain"}, {b, "plain"}, {s.src, "courier-backup.db"}} {
		deleted[ref.ns+"/"+ref.name] = watchSecretFor(t, ref.ns, ref.name, watch.Deleted)
	}

	s.courier.Stop()
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--compat=reflector,replicator")
	c.WaitLeader(t.Context())
	time.Sleep(quiet)
	for ref, gone := range deleted {
		if gone() {
			t.Errorf("%s was deleted", ref)
		}
	}
	eventually(t, converge, "PullRefused on the protected source", eventWith(s.src, "db", "PullRefused", "is a source itself"))
	eventually(t, converge, "PullRefused on the plain source", eventWith(s.src, "plain", "PullRefused", "is a source itself"))

	deleteSecret(t, s.src, "db")
	eventually(t, converge, "the protected source restored", secretIn(s.src, "db", data))
	eventually(t, converge, "SourceRestored", eventWith(s.src, "db", "SourceRestored"))
	for _, ns := range []string{a, b} {
		if deleted[ns+"/db"]() {
			t.Errorf("the replica in %s was deleted", ns)
		}
	}
}

// SPEC: replicate-keys on a typed Secret whose type requires a key the
// list leaves out (a kubernetes.io/tls source shared as "a CA bundle without
// its private key") gives Opaque replicas holding the listed keys only: the
// private key is never copied, and nothing fails.
func TestReplicateKeysOnATLSSecretGivesOpaqueReplicasWithoutTheKey(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "tls", nil)
	createSecret(t, s.src, "cert", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReplicateKeys, "ca.crt, tls.crt"),
		withData("ca.crt", "CA"), withData("tls.crt", "CRT"), withData("tls.key", "KEY"),
		func(x *corev1.Secret) { x.Type = corev1.SecretTypeTLS })
	want := map[string][]byte{"ca.crt": []byte("CA"), "tls.crt": []byte("CRT")}
	eventually(t, converge, "an Opaque replica with the listed keys", secretWhere(dst, "cert", func(r *corev1.Secret) bool {
		return r.Type == corev1.SecretTypeOpaque && equalData(r.Data, want)
	}))
	consistently(t, quiet, "no ReplicaFailed", func(ctx context.Context) (bool, error) {
		return eventCount(t, s.src, "cert", "ReplicaFailed") == 0, nil
	})

	updateSecret(t, s.src, "cert", func(x *corev1.Secret) { delete(x.Annotations, keyReplicateKeys) })
	eventually(t, converge, "every key, and the source's type, once the list is removed", secretWhere(dst, "cert", func(r *corev1.Secret) bool {
		return r.Type == corev1.SecretTypeTLS && string(r.Data["tls.key"]) == "KEY"
	}))
}

// SPEC (Guard): the backup follows its protected source's type. A source
// replaced by a Secret of another type while courier was down (a
// certificate rotated by hand) is backed up as it is now, and restored so.
func TestTheBackupFollowsASourceWhoseTypeChanged(t *testing.T) {
	s := setupReplication(t)
	createSecret(t, s.src, "cert", withLabel(keyProtect, "true"), withData("password", "old"))
	eventually(t, converge, "Opaque backup", backupIn(s.src, "cert", corev1.SecretTypeOpaque, map[string][]byte{"password": []byte("old")}))

	s.courier.Stop()
	deleteSecret(t, s.src, "cert")
	tls := map[string][]byte{"tls.crt": []byte("CRT2"), "tls.key": []byte("KEY2")}
	createSecret(t, s.src, "cert", withLabel(keyProtect, "true"), withData("tls.crt", "CRT2"), withData("tls.key", "KEY2"),
		func(x *corev1.Secret) { x.Type = corev1.SecretTypeTLS })
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitLeader(t.Context())
	eventually(t, converge, "the backup is the new TLS Secret", backupIn(s.src, "cert", corev1.SecretTypeTLS, tls))

	deleteSecret(t, s.src, "cert")
	eventually(t, converge, "restored as the new TLS Secret", secretWhere(s.src, "cert", func(x *corev1.Secret) bool {
		return x.Type == corev1.SecretTypeTLS && equalData(x.Data, tls)
	}))
}

// SPEC (Guard): a protected source is protected from its first sight. One
// deleted before courier wrote its backup, but held by a finalizer (its
// content still readable), gets its backup from what it holds, keeps its
// replicas, and is restored once the deletion completes.
func TestAProtectedSourceDeletedBeforeItsBackupIsStillRestored(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	data := map[string][]byte{"k": []byte("v")}
	createSecret(t, s.src, "ca", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"),
		func(x *corev1.Secret) { x.Finalizers = []string{"example.com/hold"} })
	eventually(t, converge, "replica", secretIn(dst, "ca", data))
	deletedReplica := watchSecretFor(t, dst, "ca", watch.Deleted)

	// courier is down: the source's backup has not been written (deleted
	// here to stand for that), and the source is deleted.
	s.courier.Stop()
	// It may not be there yet: the replica can be written before it.
	if err := admin().CoreV1().Secrets(s.src).Delete(t.Context(), "courier-backup.ca", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	deleteSecret(t, s.src, "ca")
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitLeader(t.Context())
	eventually(t, converge, "backup written from the terminating source", backupIn(s.src, "ca", corev1.SecretTypeOpaque, data))

	updateSecret(t, s.src, "ca", func(x *corev1.Secret) { x.Finalizers = nil })
	eventually(t, converge, "restored", func(ctx context.Context) (bool, error) {
		x, err := getSecret(ctx, s.src, "ca")
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && x.DeletionTimestamp == nil && equalData(x.Data, data), nil
	})
	time.Sleep(quiet)
	if deletedReplica() {
		t.Error("the replica was deleted")
	}
}

// SPEC (installations): two installations, each with its own namespace and
// source namespaces, and one workload opted in: one of them records its
// baseline (at most one baseline write each on first sight), nothing is
// written while nothing changes, and a change is exactly one rollout.
func TestTwoInstallationsOnOneWorkloadDoNotFight(t *testing.T) {
	srcA, srcB := newNamespace(t, "srca", nil), newNamespace(t, "srcb", nil)
	ns := newNamespace(t, "app", nil)
	createSecret(t, ns, "db", withAnnotation(keyReload, "true"), withData("k", "1"))
	createDeployment(t, ns, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	a := startCourier(t, "--source-namespaces="+srcA)
	b := startCourier(t, "--source-namespaces="+srcB)
	a.WaitLeader(t.Context())
	b.WaitLeader(t.Context())
	before := settled(t, ns, "app")

	time.Sleep(quiet) // both have seen the workload and made their choice
	d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Generation > 3 {
		t.Errorf("generation %d after first sight: the baseline was written %d times", d.Generation, d.Generation-1)
	}
	consistently(t, quiet, "nothing written while nothing changes", func(ctx context.Context) (bool, error) {
		x, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && x.ResourceVersion == d.ResourceVersion, err
	})

	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	rolledOutOnce(t, ns, "app", before, "secret/db")
}

// SPEC: never a rollout on first sight — also for a workload created in the
// same second as a change made together with its input's opt-in, which
// rolls out only the workloads that consumed the input then.
func TestAWorkloadCreatedWithAChangeIsNotRolledOut(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "app", nil)
	createSecret(t, ns, "db", withData("k", "1"))
	createDeployment(t, ns, "old", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	unsettled(t, ns, "old")
	seenAll(t, ns)

	// Early in a second, so the change and the new workload share it.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 50*time.Millisecond)))
	updateSecret(t, ns, "db", func(x *corev1.Secret) {
		x.Annotations = map[string]string{keyReload: "true"}
		x.Data["k"] = []byte("2")
	})
	createDeployment(t, ns, "new", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))

	rolledOutOnce(t, ns, "old", 1, "secret/db")
	eventually(t, converge, "a baseline on the new workload", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "new", metav1.GetOptions{})
		return err == nil && d.Annotations[keyInputs] != "", nil
	})
	noRollout(t, ns, "new", 1)
}

// SPEC (custom kinds): a kind courier may not watch holds nothing else up.
// With --reload-resources=rollouts.argoproj.io, the CRD there and readable,
// but no right to list or watch Rollouts, Deployments are reloaded as
// ever, courier becomes ready, and the log and a metric say what is wrong.
func TestACustomKindCourierMayNotWatchHoldsNothingUp(t *testing.T) {
	const name = "rollouts.argoproj.io"
	ensureRolloutCRD(t)
	id := identityWith(t, "courier-no-rollouts", []rbacv1.PolicyRule{{APIGroups: []string{"apiextensions.k8s.io"},
		Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{name}, Verbs: []string{"list", "watch"}}})
	ns := newNamespace(t, "app", nil)
	createSecret(t, ns, "db", withData("k", "1"))
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	c := startCourierAs(t, id, nil, "--source-namespaces="+ns, "--reload-resources="+name)
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	before := settled(t, ns, "app")
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	rolledOutOnce(t, ns, "app", before, "secret/db")

	if v, ok := c.MetricValue(t.Context(), `courier_custom_kind_watch_forbidden{resource="`+name+`"}`); !ok || v != 1 {
		t.Errorf("courier_custom_kind_watch_forbidden = %v (found %v), want 1", v, ok)
	}
	if !strings.Contains(c.Logs(), "courier may not list or watch Rollout objects") {
		t.Error("no log line says courier may not watch Rollouts")
	}
	// courier status, given courier's flags, says so too.
	out := courierStatus(t, "--namespace="+id.ns(), "--service-account="+id.sa, "--reload-resources="+name)
	if !strings.Contains(out, name+"  NO") || !strings.Contains(out, "may not list of rollouts") {
		t.Errorf("courier status does not say courier may not watch Rollouts:\n%s", out)
	}
	if out := courierStatus(t, "--namespace="+id.ns(), "--service-account="+id.sa, "--reload-resources=widgets.example.com"); !strings.Contains(out, "widgets.example.com  NO") {
		t.Errorf("courier status on a kind not granted at all:\n%s", out)
	}
}

// SPEC (Replicas, guard): every courier label and annotation on a replica is
// guarded like content — courier.dev/copied-metadata and courier.dev/via
// included: an edit is reverted with ReplicaReverted, and a writer that keeps
// making it meets the revert budget (ReplicaContested), not an endless loop.
func TestEditsToCouriersOwnAnnotationsAreRevertsWithABudget(t *testing.T) {
	s := setupReplication(t, "--compat=replicator")
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "repo", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyCopyLabels, "team"),
		withLabel("team", "a"), withData("url", "https://git.example.com/x.git"))
	createSecret(t, s.src, "compat", withAnnotation("replicator.v1.mittwald.de/replicate-to", dst), withData("k", "v"))
	hasCopied := func(r *corev1.Secret) bool { return r.Annotations["courier.dev/copied-metadata"] != "" }
	hasVia := func(r *corev1.Secret) bool { return r.Annotations["courier.dev/via"] != "" }
	eventually(t, converge, "replica with copied metadata", secretWhere(dst, "repo", hasCopied))
	eventually(t, converge, "compat replica with via", secretWhere(dst, "compat", hasVia))

	updateSecret(t, dst, "repo", func(r *corev1.Secret) { delete(r.Annotations, "courier.dev/copied-metadata") })
	eventually(t, converge, "copied-metadata restored", secretWhere(dst, "repo", hasCopied))
	eventually(t, converge, "ReplicaReverted for copied-metadata", eventWith(dst, "repo", "ReplicaReverted", s.src+"/repo"))
	updateSecret(t, dst, "compat", func(r *corev1.Secret) { delete(r.Annotations, "courier.dev/via") })
	eventually(t, converge, "via restored", secretWhere(dst, "compat", hasVia))
	eventually(t, converge, "ReplicaReverted for via", eventWith(dst, "compat", "ReplicaReverted", s.src+"/compat"))

	notVia := func(r *corev1.Secret) bool { return !hasVia(r) }
	changes := fight(t, "stripping courier.dev/via", notVia, func(r *corev1.Secret) { delete(r.Annotations, "courier.dev/via") },
		eventWith(dst, "compat", "ReplicaContested", "more than 5 reverts"), dst, "compat")
	t.Logf("courier.dev/via stripped %d times before courier backed off", changes)
}

// SPEC (--compat=reflector): Reflector's namespace selectors
// (reflection-allowed-namespaces-selector, reflection-auto-namespaces-selector)
// are honoured as Reflector documents — a namespace matches the list or the
// selector — in replication and in pulls; a selector alone never means
// every namespace.
func TestReflectorNamespaceSelectorsAreHonoured(t *testing.T) {
	s := setupReplication(t, "--compat=reflector")
	prod := s.target(t, "prod", map[string]string{"env": "prod"})
	dev := s.target(t, "dev", nil)
	named := s.target(t, "named", nil)
	createSecret(t, s.src, "by-selector", withAnnotation(reflectorKey("reflection-allowed"), "true"), withAnnotation(reflectorKey("reflection-auto-enabled"), "true"),
		withAnnotation(reflectorKey("reflection-auto-namespaces-selector"), "env=prod,test="+s.id), withData("k", "v"))
	createSecret(t, s.src, "list-or-selector", withAnnotation(reflectorKey("reflection-allowed"), "true"), withAnnotation(reflectorKey("reflection-auto-enabled"), "true"),
		withAnnotation(reflectorKey("reflection-auto-namespaces"), named), withAnnotation(reflectorKey("reflection-auto-namespaces-selector"), "env=prod,test="+s.id), withData("k", "v"))
	want := map[string][]byte{"k": []byte("v")}
	eventually(t, converge, "replica in the selected namespace", secretIn(prod, "by-selector", want))
	eventually(t, converge, "replicas in the listed and the selected namespaces", func(ctx context.Context) (bool, error) {
		a, _ := secretIn(prod, "list-or-selector", want)(ctx)
		b, _ := secretIn(named, "list-or-selector", want)(ctx)
		return a && b, nil
	})
	consistently(t, quiet, "nothing elsewhere", func(ctx context.Context) (bool, error) {
		a, _ := secretGone(dev, "by-selector")(ctx)
		b, _ := secretGone(named, "by-selector")(ctx)
		c, _ := secretGone(dev, "list-or-selector")(ctx)
		return a && b && c, nil
	})

	// Pulls: allowed by the selector only.
	createSecret(t, s.src, "pullable", withAnnotation(reflectorKey("reflection-allowed"), "true"),
		withAnnotation(reflectorKey("reflection-allowed-namespaces-selector"), "env=prod"), withData("k", "pulled"))
	createSecret(t, prod, "mirror", withAnnotation(reflectorKey("reflects"), s.src+"/pullable"))
	createSecret(t, dev, "mirror", withAnnotation(reflectorKey("reflects"), s.src+"/pullable"), withData("mine", "x"))
	eventually(t, converge, "the pull from a selected namespace filled", secretIn(prod, "mirror", map[string][]byte{"k": []byte("pulled")}))
	eventually(t, converge, "PullRefused elsewhere", eventWith(dev, "mirror", "PullRefused", "reflection-allowed-namespaces-selector"))
	// Its namespace labelled to match: the pull is honoured now.
	setNamespaceLabels(t, dev, func(l map[string]string) { l["env"] = "prod" })
	eventually(t, converge, "the pull filled once its namespace matches", secretIn(dev, "mirror", map[string][]byte{"k": []byte("pulled")}))
}

// reflectorKey is a Reflector annotation key.
func reflectorKey(name string) string { return "reflector.v1.k8s.emberstack.com/" + name }

// SPEC (--compat, pulls): a refused pull costs nothing per change of its
// source and its PullRefused Event is written once per cause; an
// installation that does not serve the source's namespace stays silent.
func TestRefusedPullsDoNotAmplify(t *testing.T) {
	s := setupReplication(t, "--compat=replicator")
	other := startCourier(t, "--source-namespaces="+newNamespace(t, "elsewhere", nil), "--compat=replicator")
	other.WaitLeader(t.Context())
	tenant := s.target(t, "tenant", nil)
	createSecret(t, s.src, "db", withData("k", "v")) // allows no pulls
	const pulls = 40
	for i := range pulls {
		createSecret(t, tenant, fmt.Sprintf("p%d", i), withAnnotation("replicator.v1.mittwald.de/replicate-from", s.src+"/db"))
	}
	for i := range pulls {
		eventually(t, converge, "PullRefused", eventWith(tenant, fmt.Sprintf("p%d", i), "PullRefused", "replication-allowed"))
	}
	time.Sleep(quiet)
	adds := func() float64 {
		v, _ := s.courier.MetricValue(t.Context(), `courier_workqueue_adds_total{name="replicator"}`)
		return v
	}
	before := adds()
	for i := range 3 {
		updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Data["k"] = []byte(fmt.Sprintf("v%d", i)) })
	}
	time.Sleep(quiet)
	if n := adds() - before; n >= pulls {
		t.Errorf("3 changes of the source queued %g keys: its refused pulls are synced again", n)
	}
	for i := range pulls {
		name := fmt.Sprintf("p%d", i)
		if n := eventCount(t, tenant, name, "PullRefused"); n != 1 {
			t.Errorf("%s: %d PullRefused Events, want 1", name, n)
		}
	}
}

// ensureRolloutCRD makes sure rollouts.argoproj.io is served (a minimal CRD
// when Argo Rollouts' own is not installed, deleted at the end) and returns
// its resource.
func ensureRolloutCRD(t *testing.T) schema.GroupVersionResource {
	t.Helper()
	crds := dynamicAdmin(t).Resource(crdResource)
	var u *unstructured.Unstructured
	var err error
	eventually(t, 30*time.Second, "rollouts.argoproj.io not being deleted", func(ctx context.Context) (bool, error) {
		u, err = crds.Get(ctx, "rollouts.argoproj.io", metav1.GetOptions{})
		return err != nil || u.GetDeletionTimestamp() == nil, nil
	})
	if apierrors.IsNotFound(err) {
		return createCRD(t, "argoproj.io", "rollouts", "Rollout")
	} else if err != nil {
		t.Fatal(err)
	}
	versions, _, _ := unstructured.NestedSlice(u.Object, "spec", "versions")
	for _, v := range versions {
		if m, _ := v.(map[string]any); m["storage"] == true {
			return schema.GroupVersionResource{Group: "argoproj.io", Version: m["name"].(string), Resource: "rollouts"}
		}
	}
	t.Fatal("rollouts.argoproj.io has no storage version")
	return schema.GroupVersionResource{}
}

// SPEC (courier migrate): Rollouts carrying Reloader's annotations are
// listed, mapped and, with --apply, annotated like Deployments; without
// --reload-resources=rollouts.argoproj.io each says courier would not
// reload it.
func TestMigrateSeesArgoRollouts(t *testing.T) {
	rollouts := ensureRolloutCRD(t)
	ns := newNamespace(t, "mig-rollouts", nil)
	createSecret(t, ns, "db", withData("k", "1"))
	tmpl := map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1",
			"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "db"}}}}}}}
	createObject(t, rollouts, "Rollout", ns, "web", map[string]string{"reloader.stakater.com/auto": "true"},
		map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}, "template": tmpl})

	find := func(r migrate.Report) *migrate.Object {
		for i, o := range r.Objects {
			if o.Namespace == ns && o.Name == "web" {
				return &r.Objects[i]
			}
		}
		return nil
	}
	o := find(courierMigrate(t))
	if o == nil {
		t.Fatal("courier migrate does not list the Rollout")
	}
	if diff := cmp.Diff(map[string]string{"courier.dev/reload": "true"}, o.Add); diff != "" {
		t.Errorf("the Rollout's courier annotations (-want +got):\n%s", diff)
	}
	warned := false
	for _, n := range o.NotHonoured {
		warned = warned || strings.Contains(n.Why, "--reload-resources=rollouts.argoproj.io")
	}
	if !warned {
		t.Errorf("no note that courier reloads Rollouts only with --reload-resources: %+v", o.NotHonoured)
	}
	// --apply only within the test's namespace: cluster-wide it would
	// annotate the objects of the tests beside it (and meet them deleted).
	if o := find(courierMigrate(t, "--reload-resources=rollouts.argoproj.io", "--watch-namespaces="+ns, "--apply")); o == nil || !o.Applied {
		t.Fatalf("--apply did not annotate the Rollout: %+v", o)
	}
	u, err := getCustom(t.Context(), t, rollouts, ns, "web")
	if err != nil || u.GetAnnotations()["courier.dev/reload"] != "true" {
		t.Errorf("the Rollout's annotations after --apply: %v (%v)", u.GetAnnotations(), err)
	}
}

// SPEC (Reload): key-level reloads hold for any number of keys. A ConfigMap
// of 70 keys consumed through one configMapKeyRef: a change to another key
// rolls nothing out, a change to the consumed key rolls out once, and the
// consumed key removed is InputMissing with nothing written.
func TestKeyLevelReloadHoldsBeyond64Keys(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "app", nil)
	data := map[string]string{}
	for i := range 70 {
		data[fmt.Sprintf("key%02d", i)] = "v"
	}
	createConfigMap(t, ns, "cfg", map[string]string{keyReload: "true"}, data)
	createDeployment(t, ns, "app", nil, podSpec([]corev1.EnvVar{keyRef("configmap", "cfg", "key07")}, nil, nil))
	eventually(t, 30*time.Second, "first ReplicaSet and baseline (the API server may still be tearing down large objects of earlier tests)", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		if err != nil || d.Annotations[keyInputs] == "" {
			return false, err
		}
		n, err := replicaSets(ctx, ns, "app")
		return n == 1, err
	})
	before := 1

	updateConfigMap(t, ns, "cfg", func(cm *corev1.ConfigMap) { cm.Data["key50"] = "changed" })
	noRollout(t, ns, "app", before)
	updateConfigMap(t, ns, "cfg", func(cm *corev1.ConfigMap) { cm.Data["key07"] = "changed" })
	rolledOutOnce(t, ns, "app", before, "configmap/cfg")
	updateConfigMap(t, ns, "cfg", func(cm *corev1.ConfigMap) { delete(cm.Data, "key07") })
	eventually(t, converge, "InputMissing naming the key", eventWith(ns, "app", "InputMissing", "configmap/cfg (key key07)"))
	noRollout(t, ns, "app", before+1)
}

// SPEC (custom kinds): what courier remembers of a custom object it cannot
// read lives as long as the object: courier_custom_kind_unreadable_objects
// counts them, and is back to 0 once a tenant has deleted them.
func TestUnreadableCustomObjectsAreForgottenWithThem(t *testing.T) {
	group := testID() + ".e2e.courier.dev"
	item := "widgets." + group + ":spec.template.metadata.annotations"
	widgets := createCRD(t, group, "widgets", "Widget")
	id := identityWith(t, "courier-unreadable", reloadResourcesRBAC(t, item))
	ns := newNamespace(t, "unreadable", nil)
	c := startCourierAs(t, id, nil, "--source-namespaces="+ns, "--reload-resources="+item)
	c.WaitReady(t.Context())
	series := `courier_custom_kind_unreadable_objects{resource="widgets.` + group + `"}`
	count := func(want float64) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			v, ok := c.MetricValue(ctx, series)
			return ok && v == want, nil
		}
	}
	eventually(t, converge, "none at first", count(0))
	const n = 20
	for i := range n {
		createObject(t, widgets, "Widget", ns, fmt.Sprintf("w%d", i), map[string]string{keyReloadOn: "secret/db"},
			map[string]any{"template": "not a map"})
	}
	eventually(t, converge, "every unreadable object counted", count(n))
	for i := range n {
		if err := dynamicAdmin(t).Resource(widgets).Namespace(ns).Delete(t.Context(), fmt.Sprintf("w%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, converge, "none once they are deleted", count(0))
}
