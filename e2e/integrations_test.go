// The tests with the third-party controllers courier is paired with, built
// from the Go module proxy at pinned versions by
// e2e/tools/build-integrations.sh (cold: about 10 minutes on two cores; make
// e2e builds them first, `make test-integrations` runs only these tests).
package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/courier-k8s/courier/e2e/cluster"
)

var (
	integrationsOnce sync.Once
	integrationsDir  string
	integrationsErr  error
)

// integrations is the directory build-integrations.sh prints
// ($COURIER_INTEGRATIONS_DIR, else built now).
func integrations(t *testing.T) string {
	t.Helper()
	integrationsOnce.Do(func() {
		if integrationsDir = os.Getenv("COURIER_INTEGRATIONS_DIR"); integrationsDir != "" {
			return
		}
		cmd := exec.Command(filepath.Join(env.root, "e2e/tools/build-integrations.sh"))
		cmd.Stderr = os.Stderr // a cold build's progress
		out, err := cmd.Output()
		integrationsDir, integrationsErr = strings.TrimSpace(string(out)), err
	})
	if integrationsErr != nil {
		t.Fatalf("build the third-party controllers: %v", integrationsErr)
	}
	return integrationsDir
}

// applyCRDs applies the CRDs in dir server-side (they are over the
// client-side apply annotation's 256 KiB).
func applyCRDs(t *testing.T, dir string) {
	t.Helper()
	if out, err := kubectl(t.Context(), "apply", "--server-side", "--force-conflicts", "-f", dir); err != nil {
		t.Fatalf("apply CRDs %s: %v\n%s", dir, err, out)
	}
}

// startController runs a third-party controller as admin until the test
// ends (stopped by its PID), its log printed if the test failed.
func startController(t *testing.T, name, bin string, extraEnv []string, args ...string) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), extraEnv...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); logf.Close(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s log:\n%s", name, b)
		}
	})
}

// healthy waits for a 200 from url (a loopback health endpoint).
func healthy(t *testing.T, what, url string) {
	t.Helper()
	eventually(t, time.Minute, what+" healthy", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil // not listening yet
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func freePort(t *testing.T) string {
	t.Helper()
	p, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(p)
}

var rollouts = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// startArgoRollouts applies Argo Rollouts' CRDs and runs its controller
// (single instance, cluster-wide; its metrics and health servers on
// loopback: build-integrations.sh).
func startArgoRollouts(t *testing.T) {
	t.Helper()
	dir := integrations(t)
	applyCRDs(t, filepath.Join(dir, "crds/argo"))
	health := freePort(t)
	startController(t, "rollouts-controller", filepath.Join(dir, "bin/rollouts-controller"), nil,
		"--kubeconfig="+env.cluster.Kubeconfig, "--leader-elect=false", "--loglevel=info",
		"--metricsPort="+freePort(t), "--healthzPort="+health)
	healthy(t, "Argo Rollouts", "http://127.0.0.1:"+health+"/healthz")
}

// argoOverlayRBAC is the ClusterRole manifests/argo-rollouts adds.
func argoOverlayRBAC(t *testing.T) []rbacv1.PolicyRule {
	t.Helper()
	return reloadResourcesRules(t, "manifests/argo-rollouts", kustomize(t, "e2e/testdata/overlays/argo-rollouts"))
}

func createRollout(t *testing.T, ns, name string, annotations map[string]string, spec map[string]any) {
	t.Helper()
	createObject(t, rollouts, "Rollout", ns, name, annotations, spec)
}

// rolloutState is what Argo Rollouts says of a Rollout: its revision, and
// whether it is Healthy with the current pods the stable ones, at its
// current generation; and how many ReplicaSets it owns.
type rolloutState struct {
	revision    string
	completed   bool
	replicaSets int
}

func rolloutStateOf(ctx context.Context, t *testing.T, ns, name string) (rolloutState, *unstructured.Unstructured, error) {
	u, err := dynamicAdmin(t).Resource(rollouts).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return rolloutState{}, nil, err
	}
	phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
	current, _, _ := unstructured.NestedString(u.Object, "status", "currentPodHash")
	stable, _, _ := unstructured.NestedString(u.Object, "status", "stableRS")
	observed, _, _ := unstructured.NestedString(u.Object, "status", "observedGeneration")
	rss, err := admin().AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return rolloutState{}, nil, err
	}
	n := 0
	for _, rs := range rss.Items {
		for _, o := range rs.OwnerReferences {
			if o.Kind == "Rollout" && o.Name == name {
				n++
			}
		}
	}
	return rolloutState{
		revision:    u.GetAnnotations()["rollout.argoproj.io/revision"],
		completed:   phase == "Healthy" && current != "" && current == stable && observed == strconv.FormatInt(u.GetGeneration(), 10),
		replicaSets: n,
	}, u, nil
}

// rolloutAt waits until Argo Rollouts has completed revision rev of ns/name
// with replicaSets ReplicaSets.
func rolloutAt(t *testing.T, ns, name, rev string, replicaSets int) *unstructured.Unstructured {
	t.Helper()
	var last *unstructured.Unstructured
	eventually(t, time.Minute, fmt.Sprintf("Rollout %s/%s completed at revision %s", ns, name, rev), func(ctx context.Context) (bool, error) {
		s, u, err := rolloutStateOf(ctx, t, ns, name)
		last = u
		return err == nil && s.completed && s.revision == rev && s.replicaSets == replicaSets, err
	})
	return last
}

func rolloutStays(t *testing.T, ns, name, rev string) {
	t.Helper()
	consistently(t, quiet, fmt.Sprintf("Rollout %s/%s stays at revision %s", ns, name, rev), func(ctx context.Context) (bool, error) {
		s, _, err := rolloutStateOf(ctx, t, ns, name)
		return err == nil && s.revision == rev, err
	})
}

// createRefRollout creates Deployment base, opted in and kept at 0
// replicas, with pod spec spec, and Rollout name, opted in, taking its
// template from it (spec.workloadRef), its pods ready minReady seconds
// before they count as available.
func createRefRollout(t *testing.T, ns, name, base string, spec corev1.PodSpec, minReady int64) {
	t.Helper()
	createDeployment(t, ns, base, map[string]string{keyReload: "true"}, spec)
	if _, err := admin().AppsV1().Deployments(ns).Patch(t.Context(), base, "application/merge-patch+json", []byte(`{"spec":{"replicas":0}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	createRollout(t, ns, name, map[string]string{keyReload: "true"}, map[string]any{
		"replicas":        int64(1),
		"minReadySeconds": minReady,
		"selector":        map[string]any{"matchLabels": map[string]any{"app": base}},
		"workloadRef":     map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": base},
		"strategy":        map[string]any{"canary": map[string]any{}},
	})
}

func rolloutSpec(name string, template map[string]any) map[string]any {
	return map[string]any{
		"replicas": int64(1),
		"selector": map[string]any{"matchLabels": map[string]any{"app": name}},
		"template": template,
		"strategy": map[string]any{"canary": map[string]any{}},
	}
}

func podTemplate(name string, spec corev1.PodSpec) map[string]any {
	s, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		panic(err)
	}
	return map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": name}}, "spec": s}
}

// SPEC (--reload-resources=rollouts.argoproj.io): with the real Argo
// Rollouts controller, a Rollout consuming a changed Secret gets one new
// revision (one new ReplicaSet) that Argo completes, like a Deployment; a
// Rollout with spec.workloadRef is reloaded through its Deployment's pod
// template, which Argo follows; courier runs with exactly the RBAC of
// manifests/argo-rollouts, each permission of which is needed.
func TestArgoRolloutsReloadedThroughTheRealController(t *testing.T) {
	startArgoRollouts(t)
	rules := argoOverlayRBAC(t)
	id := identityWith(t, "courier-argo", rules)
	ns := newNamespace(t, "argo", nil)
	c := startCourierAs(t, id, nil, "--source-namespaces="+ns, "--reload-resources=rollouts.argoproj.io")
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())

	createSecret(t, ns, "db", withData("password", "1"))
	createSecret(t, ns, "api", withData("token", "1"))
	createRollout(t, ns, "web", map[string]string{keyReload: "true"},
		rolloutSpec("web", podTemplate("web", podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))))
	// workloadRef: the template lives in a Deployment kept at 0 replicas.
	// Both are opted in: the Rollout alone writes (one revision per change).
	createRefRollout(t, ns, "ref", "base", podSpec([]corev1.EnvVar{keyRef("secret", "api", "token")}, nil, nil), 0)
	rolloutAt(t, ns, "web", "1", 1)
	rolloutAt(t, ns, "ref", "1", 1)
	customBaselined(t, rollouts, ns, "web")
	customBaselined(t, rollouts, ns, "ref")

	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Data["password"] = []byte("2") })
	u := rolloutAt(t, ns, "web", "2", 2)
	rolloutStays(t, ns, "web", "2")
	if h, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", keyConfigHash); len(h) != 64 {
		t.Errorf("Rollout web's pod template %s = %q, want a sha256", keyConfigHash, h)
	}
	if got := u.GetAnnotations()[keyReloadedFor]; got != "secret/db" {
		t.Errorf("Rollout web %s = %q, want secret/db", keyReloadedFor, got)
	}
	eventually(t, converge, "Reloaded Event on Rollout web", eventWith(ns, "web", "Reloaded", "secret/db"))
	if s, _, err := rolloutStateOf(t.Context(), t, ns, "ref"); err != nil || s.revision != "1" {
		t.Errorf("Rollout ref moved to revision %q (%v) on a Secret it does not consume", s.revision, err)
	}

	updateSecret(t, ns, "api", func(s *corev1.Secret) { s.Data["token"] = []byte("2") })
	u = rolloutAt(t, ns, "ref", "2", 2)
	rolloutStays(t, ns, "ref", "2")
	d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "base", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Spec.Template.Annotations[keyConfigHash]) != 64 {
		t.Errorf("the referenced Deployment's pod template %s = %q, want a sha256", keyConfigHash, d.Spec.Template.Annotations[keyConfigHash])
	}
	// (It may hold a first-sight baseline from before its Rollout existed.)
	if d.Annotations[keyReloadedFor] != "" {
		t.Errorf("the referenced Deployment got courier's record of a rollout %v; it belongs on the Rollout", d.Annotations)
	}
	// The record follows the hash (written into the Deployment first), so
	// Argo may finish the revision before it lands.
	eventually(t, converge, "courier's record on Rollout ref", func(ctx context.Context) (bool, error) {
		got, err := getCustom(ctx, t, rollouts, ns, "ref")
		if err != nil {
			return false, err
		}
		u = got
		return got.GetAnnotations()[keyReloadedFor] == "secret/api", nil
	})
	if _, ok := u.Object["spec"].(map[string]any)["template"]; ok {
		t.Error("courier wrote a template into a workloadRef Rollout (Argo requires it empty)")
	}
	if strings.Contains(c.Logs(), "is forbidden") {
		t.Error("the API server refused courier something with the RBAC of manifests/argo-rollouts")
	}

	// Stopped, so the probes below are the only courier reloading Rollouts:
	// a baseline it wrote would leave their Rollouts to it (one
	// installation per workload) and no probe would patch one.
	c.Stop()
	t.Run("RBAC", func(t *testing.T) {
		extra := permissions(rules, false)
		eachPermissionUsed(t, extra, "rollouts.argoproj.io", func(t *testing.T, ns string, i int) {
			createRollout(t, ns, fmt.Sprintf("r%d", i), map[string]string{keyReloadOn: "secret/db"},
				rolloutSpec(fmt.Sprintf("r%d", i), podTemplate(fmt.Sprintf("r%d", i), podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))))
		})
	})
}

var (
	clusterSecretStores = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "clustersecretstores"}
	externalSecrets     = schema.GroupVersionResource{Group: "external-secrets.io", Version: "v1", Resource: "externalsecrets"}
)

// startESO applies External Secrets Operator's CRDs and runs its controller
// (no webhook, no leader election; metrics off, health on loopback).
func startESO(t *testing.T) {
	t.Helper()
	dir := integrations(t)
	applyCRDs(t, filepath.Join(dir, "crds/eso"))
	health := freePort(t)
	startController(t, "external-secrets", filepath.Join(dir, "bin/external-secrets"), []string{"KUBECONFIG=" + env.cluster.Kubeconfig},
		"--metrics-addr=0", "--live-addr=127.0.0.1:"+health, "--enable-leader-election=false")
	healthy(t, "External Secrets Operator", "http://127.0.0.1:"+health+"/healthz")
}

// fakeStore is a ClusterSecretStore of ESO's fake provider (standing in for
// Vault) holding key = value.
func fakeStore(name, key, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{"provider": map[string]any{"fake": map[string]any{
			"data": []any{map[string]any{"key": key, "value": value}}}}},
	}}
}

// SPEC (README "Vault (through ESO) to every namespace, with reloads"): the
// real External Secrets Operator syncs a store's value into a source Secret
// annotated for courier (through the ExternalSecret's template); a change
// of the value in the store reaches every replica, and every consuming
// Deployment rolls out exactly once.
func TestExternalSecretsValueChangeReachesEveryNamespaceAndRollsOnce(t *testing.T) {
	startESO(t)
	s := setupReplication(t)
	store := "fake-" + s.id
	stores := dynamicAdmin(t).Resource(clusterSecretStores)
	if _, err := stores.Create(t.Context(), fakeStore(store, "/app/db", "pass-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stores.Delete(context.Background(), store, metav1.DeleteOptions{}) })
	es := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
		"metadata": map[string]any{"name": "db", "namespace": s.src},
		"spec": map[string]any{
			"refreshInterval": "1s",
			"secretStoreRef":  map[string]any{"kind": "ClusterSecretStore", "name": store},
			"target": map[string]any{"name": "db", "template": map[string]any{"metadata": map[string]any{
				"annotations": map[string]any{keyReplicateTo: "test=" + s.id, keyReload: "true"}}}},
			"data": []any{map[string]any{"secretKey": "password", "remoteRef": map[string]any{"key": "/app/db"}}},
		},
	}}
	if _, err := dynamicAdmin(t).Resource(externalSecrets).Namespace(s.src).Create(t.Context(), es, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var targets []string
	for i := range 3 {
		ns := s.target(t, fmt.Sprintf("eso%d", i), nil)
		targets = append(targets, ns)
		createDeployment(t, ns, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))
	}
	eventually(t, time.Minute, "ESO wrote the source", func(ctx context.Context) (bool, error) {
		src, err := getSecret(ctx, s.src, "db")
		return err == nil && src.Labels["reconcile.external-secrets.io/managed"] == "true", nil
	})
	for _, ns := range targets {
		eventually(t, time.Minute, "ESO's value replicated to "+ns, secretIn(ns, "db", map[string][]byte{"password": []byte("pass-1")}))
		settled(t, ns, "app")
	}

	// The value changes in the store: ESO → the source → every replica →
	// one rollout per consumer.
	u, err := stores.Get(t.Context(), store, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(u.Object, []any{map[string]any{"key": "/app/db", "value": "pass-2"}}, "spec", "provider", "fake", "data"); err != nil {
		t.Fatal(err)
	}
	if _, err := stores.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, ns := range targets {
		eventually(t, 30*time.Second, "the new value replicated to "+ns, secretIn(ns, "db", map[string][]byte{"password": []byte("pass-2")}))
	}
	for _, ns := range targets {
		rolledOutOnce(t, ns, "app", 1, "secret/db")
	}
}
