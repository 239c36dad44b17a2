package e2e

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// scopedRules is the Role of manifests/namespace-scoped/access: what
// courier needs in each namespace it watches.
func scopedRules(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	objs, err := renderManifests(t.Context(), "manifests/namespace-scoped/access")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if r, ok := o.(*rbacv1.Role); ok && r.Name == "courier" {
			return r.Rules
		}
	}
	t.Fatal("manifests/namespace-scoped/access has no Role courier")
	return nil
}

// scopedIdentity is a ServiceAccount with no ClusterRole at all: the
// leader Role of manifests/ in courier's namespace, and rules in a Role in
// each of namespaces (which must include courier's own).
func scopedIdentity(t *testing.T, sa string, rules []rbacv1.PolicyRule, namespaces ...string) identity {
	t.Helper()
	id := identity{sa: sa, rules: manifestRBAC{leader: env.rbac.leader}}
	rbac := admin().RbacV1()
	for _, ns := range namespaces {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}, Rules: rules}
		binding := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns},
			Subjects:   id.subjects(),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: sa},
		}
		if err := upsert(t.Context(), role, rbac.Roles(ns).Create, rbac.Roles(ns).Update); err != nil {
			t.Fatal(err)
		}
		if err := upsert(t.Context(), binding, rbac.RoleBindings(ns).Create, rbac.RoleBindings(ns).Update); err != nil {
			t.Fatal(err)
		}
	}
	return id
}

// TestNamespaceScopedCourierNeedsOnlyRoles runs courier as a ServiceAccount
// bound to no ClusterRole: Roles in two namespaces a and b and in its own,
// as manifests/namespace-scoped grants. A source in a replicates into b and
// never into c (whose labels match too); an edited replica in b is
// reverted; a Deployment in b consuming the replica rolls out once per
// change; and the API server never refuses courier anything, so courier
// never asked for anything outside a, b and its own namespace (RBAC would
// have refused it, and client-go logs each refusal).
func TestNamespaceScopedCourierNeedsOnlyRoles(t *testing.T) {
	tid := testID()
	labels := map[string]string{"test": tid}
	a := newNamespace(t, "scoped-a", labels)
	b := newNamespace(t, "scoped-b", labels)
	c := newNamespace(t, "scoped-c", labels)
	own := newNamespace(t, "courier-scoped", nil)
	id := scopedIdentity(t, "courier-scoped-"+tid, scopedRules(t), a, b, own)
	cp := startCourierAs(t, id, nil, "--namespace="+own, "--watch-namespaces="+a+","+b, "--source-namespaces="+a, "--reload-debounce=100ms")
	cp.WaitLeader(t.Context())

	createSecret(t, a, "shared", withAnnotation(keyReplicateTo, "test="+tid), withData("password", "v1"))
	withinSpec(t, "replica in b", secretIn(b, "shared", map[string][]byte{"password": []byte("v1")}))
	consistently(t, quiet, "no replica in c, which courier does not watch", secretGone(c, "shared"))

	// Reverted.
	eventually(t, converge, "replica edited", editSecret(b, "shared", "password", "edited"))
	withinSpec(t, "edited replica reverted", secretIn(b, "shared", map[string][]byte{"password": []byte("v1")}))

	// Reloaded, once per change.
	createDeployment(t, b, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "shared", "password")}, nil, nil))
	before := settled(t, b, "app")
	noRollout(t, b, "app", before)
	updateSecret(t, a, "shared", func(s *corev1.Secret) { s.Data["password"] = []byte("v2") })
	withinSpec(t, "replica updated", secretIn(b, "shared", map[string][]byte{"password": []byte("v2")}))
	rolledOutOnce(t, b, "app", before, "secret/shared")
	updateSecret(t, a, "shared", func(s *corev1.Secret) { s.Data["password"] = []byte("v3") })
	rolledOutOnce(t, b, "app", before+1, "secret/shared")

	// A namespace relabelled out of the selector loses its replica: its
	// labels are read through the Role alone.
	setNamespaceLabels(t, b, func(l map[string]string) { delete(l, "test") })
	withinSpec(t, "replica deleted when b stops matching", secretGone(b, "shared"))
	consistently(t, quiet, "still nothing in c", secretGone(c, "shared"))

	if refused := linesWith(cp.Logs(), "forbidden"); refused != "" {
		t.Errorf("the API server refused the namespace-scoped courier something (a request outside its Roles):\n%s", refused)
	}
}

// TestNamespaceScopedRBACIsMinimal removes each permission of the Role of
// manifests/namespace-scoped/access in turn and shows courier's log with
// the API server refusing exactly that permission, as TestRBACIsMinimal
// does for the cluster-wide RBAC: no permission of the Role is unused.
func TestNamespaceScopedRBACIsMinimal(t *testing.T) {
	installGuardPolicy(t)
	all := permissions(scopedRules(t), false)
	// probe runs one scoped courier with rules in namespaces of its own and
	// returns the first check that failed and the courier process. A scoped
	// courier sees only its --watch-namespaces, so probes do not meet:
	// they run several at once.
	probe := func(t *testing.T, sa string, rules []rbacv1.PolicyRule, env []string) (failed string, cp *courierProcess) {
		tid := testID()
		src := newNamespace(t, "scoped-src", nil)
		dst := newNamespace(t, "scoped-dst", map[string]string{"test": tid})
		own := newNamespace(t, "courier-scoped", nil)
		id := scopedIdentity(t, sa, rules, src, dst, own)
		cp = startCourierAs(t, id, env, "--namespace="+own, "--watch-namespaces="+src+","+dst, "--source-namespaces="+src,
			"--reload-debounce=100ms", "--compat=replicator")
		return scopedProbe(t, cp, src, dst, tid), cp
	}
	// With the whole Role every check passes and nothing is refused; else a
	// refusal found below could be one courier meets anyway.
	t.Run("role", func(t *testing.T) {
		failed, cp := probe(t, "courier-scoped-full", rulesWithout(all, permission{}), nil)
		log := cp.Logs()
		if failed != "" {
			t.Fatalf("with the whole Role, check %q failed; courier's log:\n%s", failed, log)
		}
		if refused := linesWith(log, "is forbidden"); refused != "" {
			t.Fatalf("with the whole Role, the API server refused courier something:\n%s", refused)
		}
	})
	if t.Failed() {
		return
	}
	t.Run("without", func(t *testing.T) {
		sem := make(chan struct{}, rbacProbesAtOnce)
		var wg sync.WaitGroup
		for i, p := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				t.Run(p.String(), func(t *testing.T) {
					var env []string
					if p.verb == "list" {
						env = []string{"KUBE_FEATURE_WatchListClient=false"}
					}
					failed, cp := probe(t, fmt.Sprintf("courier-scoped-minus-%d", i), rulesWithout(all, p), env)
					// The first check fails within seconds; under load
					// courier may make the refused request later still.
					eventually(t, 30*time.Second, fmt.Sprintf("without %s courier's log shows the API server refusing it (%s; the first failed check was %q; if not, the permission is unused, or courier hides the refusal)",
						p, refusal(p), failed), func(context.Context) (bool, error) {
						return strings.Contains(cp.Logs(), refusal(p)), nil
					})
					t.Logf("without %s: log: %s; check failed: %q", p, refusal(p), failed)
				})
			}()
		}
		wg.Wait()
	})
}

// rbacProbesAtOnce is how many couriers a minimality test runs at once
// where they cannot meet: enough to overlap their waits, few enough that
// a 4 s check is not lost to a busy 2-core machine.
const rbacProbesAtOnce = 6

// scopedProbe exercises what each permission of the scoped Role is for and
// returns the first check that failed ("" if none).
func scopedProbe(t *testing.T, cp *courierProcess, src, dst, tid string) (failed string) {
	t.Helper()
	const within = 4 * time.Second
	check := func(what string, cond func(context.Context) (bool, error)) bool {
		if failed != "" {
			return false
		}
		ctx, cancel := context.WithTimeout(t.Context(), within)
		defer cancel()
		for ctx.Err() == nil {
			if ok, err := cond(ctx); ok && err == nil {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		failed = what
		return false
	}
	if !check("ready", func(ctx context.Context) (bool, error) {
		code, _, err := cp.get(ctx, "/readyz")
		return err == nil && code == 200, nil
	}) || !check("leads", cp.isLeader) {
		return failed
	}
	createSecret(t, src, "s", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "1"))
	createConfigMap(t, src, "c", map[string]string{keyReplicateTo: "test=" + tid}, map[string]string{"k": "1"})
	createSecret(t, src, "ps", withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"),
		withAnnotation("replicator.v1.mittwald.de/replication-allowed-namespaces", dst), withData("k", "p"))
	createSecret(t, dst, "pulls", withAnnotation("replicator.v1.mittwald.de/replicate-from", src+"/ps"))
	createConfigMap(t, src, "pc", map[string]string{"replicator.v1.mittwald.de/replication-allowed": "true",
		"replicator.v1.mittwald.de/replication-allowed-namespaces": dst}, map[string]string{"k": "p"})
	createConfigMap(t, dst, "pullc", map[string]string{"replicator.v1.mittwald.de/replicate-from": src + "/pc"}, nil)
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "s", "k"), keyRef("configmap", "c", "k")}, nil, nil)
	createEveryWorkloadKind(t, dst, map[string]string{keyReload: "true"}, spec)
	job := createJob(t, dst, "job", map[string]string{keyReload: "true"}, spec, false, nil)
	if !check("Secret replicated", secretIn(dst, "s", map[string][]byte{"k": []byte("1")})) ||
		!check("ConfigMap replicated", configMapIn(dst, "c", map[string]string{"k": "1"})) ||
		!check("Secret pull filled", secretIn(dst, "pulls", map[string][]byte{"k": []byte("p")})) ||
		!check("ConfigMap pull filled", configMapIn(dst, "pullc", map[string]string{"k": "p"})) ||
		!check("every workload kind baselined", everyStamp(dst, func(s workloadStamp) bool { return s.inputs != "" })) ||
		!check("Job baselined", jobBaselined(dst, "job")) {
		return failed
	}
	updateSecret(t, src, "s", func(s *corev1.Secret) { s.Data["k"] = []byte("2") })
	if !check("every workload kind rolled out", everyStamp(dst, func(s workloadStamp) bool { return s.hash != "" })) ||
		!check("Job recreated", func(ctx context.Context) (bool, error) {
			j, err := getJob(ctx, dst, "job")
			return err == nil && j.UID != job, nil
		}) {
		return failed
	}
	updateConfigMap(t, src, "c", func(cm *corev1.ConfigMap) { cm.Data["k"] = "2" })
	if !check("ConfigMap replica updated", configMapIn(dst, "c", map[string]string{"k": "2"})) {
		return failed
	}
	for i := range 2 {
		if !check(fmt.Sprintf("replica edited (%d)", i+1), editSecret(dst, "s", "k", "edited")) ||
			!check(fmt.Sprintf("replica reverted (%d)", i+1), secretIn(dst, "s", map[string][]byte{"k": []byte("2")})) {
			return failed
		}
	}
	if !check("ReplicaReverted counted twice", func(ctx context.Context) (bool, error) {
		evs, err := admin().CoreV1().Events(dst).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=s,reason=ReplicaReverted"})
		return err == nil && len(evs.Items) == 1 && evs.Items[0].Count == 2, err
	}) {
		return failed
	}
	setNamespaceLabels(t, dst, func(l map[string]string) { delete(l, "test") })
	check("replica deleted when its namespace stops matching", secretGone(dst, "s"))
	return failed
}

// TestResourceLabelSelectorKeepsOtherObjectsOutOfCouriersReachAndMemory
// runs courier with --resource-label-selector=courier-scope=yes: twenty
// unlabelled 500 KiB Secrets never reach its heap; an unlabelled source is
// never replicated and a change to an unlabelled input never rolls a
// workload out; a labelled source is replicated (its replica carries the
// label, so courier sees it and reverts an edit), its change rolls its
// consumer out once, and, protected, it is restored from its backup (which
// carries the label too) when deleted.
func TestResourceLabelSelectorKeepsOtherObjectsOutOfCouriersReachAndMemory(t *testing.T) {
	tid := testID()
	src := newNamespace(t, "sel-src", nil)
	dst := newNamespace(t, "sel-dst", map[string]string{"test": tid})
	tenant := newNamespace(t, "sel-tenant", nil)
	own := newNamespace(t, "courier-sel", nil)
	cp := startCourier(t, "--namespace="+own, "--source-namespaces="+src+","+own, "--resource-label-selector=courier-scope=yes",
		"--profiling", "--reload-debounce=100ms")
	cp.WaitLeader(t.Context())
	// courier's own namespace is filtered like any other: an unlabelled
	// source there is not seen either.
	createSecret(t, own, "own-plain", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v"))
	createSecret(t, own, "own-labelled", withLabel("courier-scope", "yes"), withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v"))
	withinSpec(t, "labelled source in courier's namespace replicated", secretIn(dst, "own-labelled", map[string][]byte{"k": []byte("v")}))
	before := liveHeap(t, cp)

	const objects, size = 20, 500 << 10
	for i := range objects {
		createSecret(t, tenant, fmt.Sprintf("big-%d", i), withData("blob", string(make([]byte, size))))
	}
	createSecret(t, src, "plain-source", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v"))
	createSecret(t, src, "shared", withLabel("courier-scope", "yes"), withLabel(keyProtect, "true"),
		withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v1"))
	withinSpec(t, "labelled source replicated", secretIn(dst, "shared", map[string][]byte{"k": []byte("v1")}))
	r, err := getSecret(t.Context(), dst, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if r.Labels["courier-scope"] != "yes" {
		t.Errorf("the replica's labels %v lack courier-scope=yes: courier would not see its own replica", r.Labels)
	}
	consistently(t, quiet, "unlabelled sources never replicated", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"plain-source", "own-plain"} {
			if gone, err := secretGone(dst, name)(ctx); !gone || err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if n := eventCount(t, src, "plain-source", "ReplicaConflict"); n > 0 {
		t.Errorf("%d ReplicaConflict Events on a source courier should not see", n)
	}
	after := liveHeap(t, cp)
	t.Logf("heap %.1f MiB → %.1f MiB with %d unlabelled Secrets of %d KiB", before/(1<<20), after/(1<<20), objects, size>>10)
	if grew := after - before; grew > 4<<20 {
		t.Errorf("courier's heap grew %.1f MiB with %.0f MiB of Secrets outside its selector, want under 4 MiB", grew/(1<<20), float64(objects*size)/(1<<20))
	}

	// The replica is seen: an edit is reverted.
	eventually(t, converge, "replica edited", editSecret(dst, "shared", "k", "edited"))
	withinSpec(t, "edited replica reverted", secretIn(dst, "shared", map[string][]byte{"k": []byte("v1")}))

	// Reload: the unlabelled input is not seen; the labelled one is.
	createSecret(t, dst, "plain", withData("k", "1"))
	createDeployment(t, dst, "app", map[string]string{keyReload: "true"},
		podSpec([]corev1.EnvVar{keyRef("secret", "shared", "k"), keyRef("secret", "plain", "k")}, nil, nil))
	n := settled(t, dst, "app")
	updateSecret(t, dst, "plain", func(s *corev1.Secret) { s.Data["k"] = []byte("2") })
	noRollout(t, dst, "app", n)
	updateSecret(t, src, "shared", func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	rolledOutOnce(t, dst, "app", n, "secret/shared")

	// Protected: restored from its backup, which courier sees.
	deleteSecret(t, src, "shared")
	eventually(t, converge, "protected source restored", secretIn(src, "shared", map[string][]byte{"k": []byte("v2")}))
	s, err := getSecret(t.Context(), src, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels["courier-scope"] != "yes" {
		t.Errorf("the restored source's labels %v lack courier-scope=yes", s.Labels)
	}
}

// TestStatusAndMigrateWorkWithTheScopedRoles runs courier status and
// courier migrate with --watch-namespaces under exactly the Roles a
// namespace-scoped courier has: they report the source in a and its
// replica in b, say what the scope leaves out, and are never refused.
func TestStatusAndMigrateWorkWithTheScopedRoles(t *testing.T) {
	tid := testID()
	a := newNamespace(t, "scoped-a", map[string]string{"test": tid})
	b := newNamespace(t, "scoped-b", map[string]string{"test": tid})
	own := newNamespace(t, "courier-scoped", nil)
	id := scopedIdentity(t, "courier-scoped-"+tid, scopedRules(t), a, b, own)
	args := []string{"--namespace=" + own, "--watch-namespaces=" + a + "," + b, "--source-namespaces=" + a}
	cp := startCourierAs(t, id, nil, args...)
	cp.WaitLeader(t.Context())
	createSecret(t, a, "shared", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v"))
	withinSpec(t, "replica in b", secretIn(b, "shared", map[string][]byte{"k": []byte("v")}))
	createDeployment(t, b, "legacy", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "shared", "k")}, nil, nil))

	kubeconfig := writeKubeconfig(t, id)
	out, errOut, code := runCourierCommand(t, append([]string{"status", "--kubeconfig=" + kubeconfig, "--resource-label-selector="}, args...)...)
	if code != 0 || errOut != "" {
		t.Fatalf("courier status under the scoped Roles: exit %d:\n%s%s", code, errOut, out)
	}
	for _, want := range []string{a + "/shared", "Scope: courier watches only the namespaces"} {
		if !strings.Contains(out, want) {
			t.Errorf("courier status does not say %q:\n%s", want, out)
		}
	}
	out, errOut, code = runCourierCommand(t, append([]string{"migrate", "--kubeconfig=" + kubeconfig}, args...)...)
	if code != 0 {
		t.Fatalf("courier migrate under the scoped Roles: exit %d:\n%s%s", code, errOut, out)
	}
	// Where Argo Rollouts is installed (by an earlier test), the Roles
	// grant no Rollouts: migrate says which namespaces it could not list
	// them in, and nothing else is refused.
	for _, line := range strings.Split(strings.TrimSpace(errOut), "\n") {
		if line != "" && !strings.HasPrefix(line, "courier migrate: not listing Argo Rollouts' Rollouts in namespace") {
			t.Errorf("courier migrate under the scoped Roles said on stderr:\n%s", line)
		}
	}
	if !strings.Contains(out, b+"/legacy") {
		t.Errorf("courier migrate does not list the Deployment with Reloader's annotation in b:\n%s", out)
	}
}

// runCourierCommand runs the courier binary with args (a subcommand) and
// returns its stdout, its stderr and its exit code.
func runCourierCommand(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), env.courier, args...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return out.String(), errOut.String(), exit.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), 0
}

// TestNamespaceScopedCustomKindsUseTheChartsRoles runs a namespace-scoped
// courier with --reload-resources as its ServiceAccount bound to what the
// chart renders for scope.namespaces and config.reloadResources: the Roles
// (the kind's objects among their rules) and the one cluster-scoped grant,
// the kind's CRD read by name. A custom resource in the watched namespace
// is reloaded once per change; one in a namespace courier does not watch
// is never touched; and nothing is refused.
func TestNamespaceScopedCustomKindsUseTheChartsRoles(t *testing.T) {
	group := testID() + ".e2e.courier.dev"
	item := "gadgets." + group
	tid := testID()
	a := newNamespace(t, "scoped-a", nil)
	c := newNamespace(t, "scoped-c", nil)
	own := newNamespace(t, "courier-scoped", nil)
	objs := helmTemplate(t, "--set=scope.namespaces={"+a+"},config.reloadResources={"+item+"}")
	role, ok := objs["Role/"+a+"/courier"]
	if !ok {
		t.Fatalf("the chart renders no Role courier in %s", a)
	}
	var r rbacv1.Role
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role, &r); err != nil {
		t.Fatal(err)
	}
	id := scopedIdentity(t, "courier-scoped-"+tid, r.Rules, a, own)
	id.rules.cluster = reloadResourcesRules(t, "the chart", objs)
	if err := id.grantCluster(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { id.revokeCluster(context.Background()) })

	gadgets := createCRD(t, group, "gadgets", "Gadget")
	op := startTestOperator(t, gadgets, "metadata", "annotations")
	cp := startCourierAs(t, id, nil, "--namespace="+own, "--watch-namespaces="+a, "--source-namespaces="+a,
		"--reload-resources="+item, "--reload-debounce=100ms")
	cp.WaitLeader(t.Context())
	for _, ns := range []string{a, c} {
		createSecret(t, ns, "db", withData("password", "1"))
		createCustom(t, gadgets, "Gadget", ns, "g", map[string]string{keyReloadOn: "secret/db"})
	}
	customBaselined(t, gadgets, a, "g")
	for _, ns := range []string{a, c} {
		updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Data["password"] = []byte("2") })
	}
	eventually(t, converge, "the gadget in the watched namespace reloaded", func(context.Context) (bool, error) {
		return op.rollouts(a, "g") == 1, nil
	})
	consistently(t, quiet, "once, and never the one courier does not watch", func(ctx context.Context) (bool, error) {
		u, err := getCustom(ctx, t, gadgets, c, "g")
		return err == nil && op.rollouts(a, "g") == 1 && op.rollouts(c, "g") == 0 && u.GetAnnotations()[keyInputs] == "", err
	})
	if refused := linesWith(cp.Logs(), "forbidden"); refused != "" {
		t.Errorf("the API server refused the namespace-scoped courier something:\n%s", refused)
	}
}

// TestResourceLabelSelectorAdoptsWhatCourierWroteBefore turns
// --resource-label-selector on for a courier that ran without it: the
// replica, the backup and the digest key it wrote then carry no selector
// label, so courier no longer sees them; it adopts each (a patch adding the
// source's label, applied only to objects carrying its own marks) instead
// of failing to create them forever. The replica is then reverted when
// edited, the protected source restored from its adopted backup, and the
// consumer rolled out once per change.
func TestResourceLabelSelectorAdoptsWhatCourierWroteBefore(t *testing.T) {
	tid := testID()
	src := newNamespace(t, "adopt-src", nil)
	dst := newNamespace(t, "adopt-dst", map[string]string{"test": tid})
	own := newNamespace(t, "courier-adopt", nil)
	args := []string{"--namespace=" + own, "--source-namespaces=" + src, "--reload-debounce=100ms"}
	before := startCourier(t, args...)
	before.WaitLeader(t.Context())
	createSecret(t, src, "shared", withLabel("courier-scope", "yes"), withLabel(keyProtect, "true"),
		withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v1"))
	withinSpec(t, "replica written without the selector", secretIn(dst, "shared", map[string][]byte{"k": []byte("v1")}))
	createDeployment(t, dst, "app", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "shared", "k")}, nil, nil))
	n := settled(t, dst, "app")
	eventually(t, converge, "backup written", func(ctx context.Context) (bool, error) {
		l, err := admin().CoreV1().Secrets(src).List(ctx, metav1.ListOptions{LabelSelector: "courier.dev/backup=true"})
		return err == nil && len(l.Items) == 1, err
	})
	before.Stop()
	for _, o := range []struct{ ns, selector string }{{dst, "courier.dev/replica=true"}, {src, "courier.dev/backup=true"}, {own, "courier.dev/digest-key=true"}} {
		l, err := admin().CoreV1().Secrets(o.ns).List(t.Context(), metav1.ListOptions{LabelSelector: o.selector + ",!courier-scope"})
		if err != nil || len(l.Items) != 1 {
			t.Fatalf("want one Secret %s without courier-scope in %s before the selector, got %d (%v)", o.selector, o.ns, len(l.Items), err)
		}
	}

	cp := startCourier(t, append(args, "--resource-label-selector=courier-scope=yes")...)
	cp.WaitLeader(t.Context())
	for _, o := range []struct{ ns, selector string }{{dst, "courier.dev/replica=true"}, {src, "courier.dev/backup=true"}, {own, "courier.dev/digest-key=true"}} {
		eventually(t, converge, o.selector+" adopted: it carries courier-scope=yes", func(ctx context.Context) (bool, error) {
			l, err := admin().CoreV1().Secrets(o.ns).List(ctx, metav1.ListOptions{LabelSelector: o.selector + ",courier-scope=yes"})
			return err == nil && len(l.Items) == 1, err
		})
	}
	eventually(t, converge, "replica edited", editSecret(dst, "shared", "k", "edited"))
	withinSpec(t, "edited replica reverted", secretIn(dst, "shared", map[string][]byte{"k": []byte("v1")}))
	updateSecret(t, src, "shared", func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	rolledOutOnce(t, dst, "app", n, "secret/shared")
	deleteSecret(t, src, "shared")
	eventually(t, converge, "protected source restored from its adopted backup", secretIn(src, "shared", map[string][]byte{"k": []byte("v2")}))
	if refused := linesWith(cp.Logs(), "already exists"); refused != "" {
		t.Errorf("courier kept failing to create what it wrote before:\n%s", refused)
	}
}

// TestNamespaceScopedCourierSaysWhichNamespaceRefusesIt: a namespace of
// --watch-namespaces where courier has no Role holds nothing else up:
// courier is ready and replicates into the others, its log names that
// namespace and the fix, and courier_watch_namespace_unavailable names it;
// once the Role is bound there, courier picks it up and replicates into it.
func TestNamespaceScopedCourierSaysWhichNamespaceRefusesIt(t *testing.T) {
	tid := testID()
	a := newNamespace(t, "scoped-a", map[string]string{"test": tid})
	b := newNamespace(t, "scoped-b", map[string]string{"test": tid})
	own := newNamespace(t, "courier-scoped", nil)
	rules := scopedRules(t)
	id := scopedIdentity(t, "courier-scoped-"+tid, rules, a, own) // none in b yet
	cp := startCourierAs(t, id, nil, "--namespace="+own, "--watch-namespaces="+a+","+b, "--source-namespaces="+a)
	eventually(t, converge, "the log names the namespace that refuses courier, and the fix", func(context.Context) (bool, error) {
		l := linesWith(cp.Logs(), "courier may not list or watch in a namespace of --watch-namespaces")
		return strings.Contains(l, `"namespace":"`+b+`"`) && strings.Contains(l, "bind courier's Role there"), nil
	})
	cp.WaitReady(t.Context())
	cp.WaitLeader(t.Context())
	unavailable := func(want float64) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			v, ok := cp.MetricValue(ctx, `courier_watch_namespace_unavailable{namespace="`+b+`"}`)
			return ok && v == want, nil
		}
	}
	eventually(t, converge, "courier_watch_namespace_unavailable names the refusing namespace", unavailable(1))
	createSecret(t, a, "shared", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "v"))
	scopedIdentity(t, id.sa, rules, b)
	// Picked up at the informers' next attempt (client-go's backoff).
	eventually(t, pickUp, "replica in the namespace granted late", secretIn(b, "shared", map[string][]byte{"k": []byte("v")}))
	eventually(t, pickUp, "courier_watch_namespace_unavailable clears it", unavailable(0))
}
