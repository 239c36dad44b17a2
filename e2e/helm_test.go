package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
)

const chartDir = "charts/courier"

// helmLabels are the labels the chart adds for Helm's sake; everything else
// it renders must be what manifests/ say.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/version", "helm.sh/chart"}

// helm runs the pinned Helm (built by e2e/tools/build.sh) as admin in the
// repository root, with its state in the test's temporary directory.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.CommandContext(t.Context(), filepath.Join(env.binDir, "helm"), append([]string{"--kubeconfig=" + env.cluster.Kubeconfig}, args...)...)
	cmd.Dir = env.root
	cmd.Env = []string{"HOME=" + home, "HELM_CACHE_HOME=" + home, "HELM_CONFIG_HOME=" + home, "HELM_DATA_HOME=" + home}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("helm %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// uninstallAtEnd uninstalls the test's Helm release courier (in default),
// if it is still there when the test ends.
func uninstallAtEnd(t *testing.T) {
	t.Cleanup(func() {
		if _, err := helm(t, "status", "courier", "--namespace=default"); err == nil {
			_, _ = helm(t, "uninstall", "courier", "--namespace=default", "--wait", "--timeout=90s")
		}
	})
}

// decodeObjects splits a YAML stream into objects keyed kind/namespace/name.
func decodeObjects(t *testing.T, raw []byte) map[string]map[string]any {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	objs := map[string]map[string]any{}
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs
		} else if err != nil {
			t.Fatalf("decode: %v\n%s", err, raw)
		}
		if len(u.Object) == 0 {
			continue
		}
		key := u.GetKind() + "/" + u.GetNamespace() + "/" + u.GetName()
		if _, dup := objs[key]; dup {
			t.Fatalf("%s rendered twice", key)
		}
		objs[key] = u.Object
	}
}

func helmTemplate(t *testing.T, args ...string) map[string]map[string]any {
	t.Helper()
	out, err := helm(t, append([]string{"template", "courier", chartDir, "--namespace=courier-system"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	return decodeObjects(t, out)
}

func kustomize(t *testing.T, dirs ...string) map[string]map[string]any {
	t.Helper()
	all := map[string]map[string]any{}
	for _, dir := range dirs {
		out, err := kubectl(t.Context(), "kustomize", dir)
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range decodeObjects(t, out) {
			all[k] = v
		}
	}
	return all
}

// withoutHelmLabels drops helmLabels from every object's metadata.
func withoutHelmLabels(objs map[string]map[string]any) map[string]map[string]any {
	for _, o := range objs {
		labels, _, _ := unstructured.NestedStringMap(o, "metadata", "labels")
		for _, l := range helmLabels {
			delete(labels, l)
		}
		_ = unstructured.SetNestedStringMap(o, labels, "metadata", "labels")
	}
	return objs
}

// TestHelmChartRendersWhatManifestsInstall is the "one source of truth"
// check: at default values the chart renders, object by object, what
// `kubectl kustomize manifests/` does (and, with the monitoring toggles on,
// manifests/monitoring/ too), except for Helm's own labels.
func TestHelmChartRendersWhatManifestsInstall(t *testing.T) {
	for _, c := range []struct {
		name string
		set  []string
		dirs []string
	}{
		{"defaults", nil, []string{"manifests"}},
		{"monitoring on", []string{"--set=serviceMonitor.enabled=true,prometheusRule.enabled=true"}, []string{"manifests", "manifests/monitoring"}},
		{"argo rollouts", []string{"--set=config.reloadResources={rollouts.argoproj.io}"}, []string{"e2e/testdata/overlays/argo-rollouts"}},
		{"secrets store csi", []string{"--set=config.reloadCSI=true"}, []string{"e2e/testdata/overlays/secrets-store-csi"}},
		{"namespace-scoped", []string{"--set=scope.namespaces={team-a,team-b}"}, []string{"e2e/testdata/scoped"}},
		{"a cluster courier replicates into", []string{"--set=remoteCluster.enabled=true"}, []string{"manifests/remote-cluster"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			chart := withoutHelmLabels(helmTemplate(t, c.set...))
			want := kustomize(t, c.dirs...)
			if diff := cmp.Diff(want, chart); diff != "" {
				t.Errorf("helm template differs from kubectl kustomize %v (-kustomize +helm):\n%s", c.dirs, diff)
			}
			for key, o := range helmTemplate(t, c.set...) {
				labels, _, _ := unstructured.NestedStringMap(o, "metadata", "labels")
				for _, l := range helmLabels {
					if labels[l] == "" {
						t.Errorf("%s lacks Helm's label %s", key, l)
					}
				}
			}
		})
	}

	t.Run("another namespace", func(t *testing.T) {
		out, err := helm(t, "template", "courier", chartDir, "--set=namespace.name=platform-courier,serviceMonitor.enabled=true,prometheusRule.enabled=true")
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(out, []byte("courier-system")) {
			t.Errorf("rendered into namespace platform-courier, the output still names courier-system:\n%s", out)
		}
		for key, o := range decodeObjects(t, out) {
			u := unstructured.Unstructured{Object: o}
			switch u.GetKind() {
			case "Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
				if u.GetKind() == "Namespace" && u.GetName() != "platform-courier" {
					t.Errorf("%s: want namespace platform-courier", key)
				}
			default:
				if u.GetNamespace() != "platform-courier" {
					t.Errorf("%s is not in platform-courier", key)
				}
			}
		}
	})

	t.Run("values become flags and pod settings", func(t *testing.T) {
		objs := helmTemplate(t,
			"--set=config.sourceNamespaces={platform,team-*},config.excludeNamespaces={kube-*}",
			"--set=config.reloadAll=true,config.reloadDebounce=5s,config.reloadQPS=2.5,config.reloadBurst=10",
			"--set=config.reloadMode=notify,config.clusterName=prod-eu,config.reloadStormChanges=0,config.reloadStormWindow=1m",
			"--set=config.leaderElect=false,config.leaseDuration=20s,config.renewDeadline=10s,config.retryPeriod=2s",
			"--set=config.kubeAPIQPS=100,config.kubeAPIBurst=200,config.replicatorWorkers=8,config.logLevel=debug,config.profiling=true",
			"--set=image.digest=sha256:"+strings.Repeat("ab", 32)+",goMemLimit=",
			"--set=nodeSelector.pool=infra,priorityClassName=system-cluster-critical,podAnnotations.a=b,podLabels.team=platform",
			"--set=imagePullSecrets[0].name=regcred-4f1c",
			"--set=replicas=3,podDisruptionBudget.enabled=false,guardPolicy.enabled=false,dashboard.enabled=false")
		d := objs["Deployment/courier-system/courier"]
		if d == nil {
			t.Fatal("no Deployment rendered")
		}
		c := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
		var args []string
		for _, a := range c["args"].([]any) {
			args = append(args, a.(string))
		}
		want := []string{"--source-namespaces=platform,team-*", "--exclude-namespaces=kube-*", "--reload-all", "--reload-mode=notify",
			"--cluster-name=prod-eu", "--reload-debounce=5s", "--reload-storm-changes=0", "--reload-storm-window=1m", "--reload-qps=2.5", "--reload-burst=10", "--leader-elect=false", "--lease-duration=20s", "--renew-deadline=10s",
			"--retry-period=2s", "--kube-api-qps=100", "--kube-api-burst=200", "--replicator-workers=8", "--log-level=debug", "--profiling"}
		if diff := cmp.Diff(want, args); diff != "" {
			t.Errorf("args (-want +got):\n%s", diff)
		}
		if img := c["image"]; img != "ghcr.io/courier-k8s/courier@sha256:"+strings.Repeat("ab", 32) {
			t.Errorf("image %v, want pinned by digest", img)
		}
		for _, e := range c["env"].([]any) {
			if e.(map[string]any)["name"] == "GOMEMLIMIT" {
				t.Errorf("goMemLimit \"\" still sets GOMEMLIMIT")
			}
		}
		for _, p := range [][]string{{"spec", "replicas"}, {"spec", "template", "spec", "nodeSelector", "pool"},
			{"spec", "template", "spec", "priorityClassName"}, {"spec", "template", "metadata", "annotations", "a"},
			{"spec", "template", "metadata", "labels", "team"}} {
			if v, ok, _ := unstructured.NestedFieldNoCopy(d, p...); !ok || v == nil {
				t.Errorf("Deployment lacks %s", strings.Join(p, "."))
			}
		}
		if ps, _, _ := unstructured.NestedSlice(d, "spec", "template", "spec", "imagePullSecrets"); fmt.Sprint(ps) != "[map[name:regcred-4f1c]]" {
			t.Errorf("imagePullSecrets %v, want [regcred-4f1c]", ps)
		}
		// Numbers from a values file reach templates as float64: large ones
		// must still be plain integers on the command line, not 1e+06.
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte("config:\n  kubeAPIBurst: 1000000\n  replicatorWorkers: 16\n  reloadBurst: 2000000\n  reloadQPS: 1000000\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		big := helmTemplate(t, "-f", file)["Deployment/courier-system/courier"]
		bigArgs, _, _ := unstructured.NestedSlice(big, "spec", "template", "spec", "containers")
		got := fmt.Sprint(bigArgs[0].(map[string]any)["args"])
		for _, a := range []string{"--kube-api-burst=1000000", "--replicator-workers=16", "--reload-burst=2000000"} {
			if !strings.Contains(got, a) {
				t.Errorf("values file with large integers: args %s lack %s", got, a)
			}
		}
		for key := range objs {
			for _, kind := range []string{"PodDisruptionBudget/", "ValidatingAdmissionPolicy/", "ConfigMap/"} {
				if strings.HasPrefix(key, kind) {
					t.Errorf("%s rendered though turned off", key)
				}
			}
		}
	})
}

// TestHelmLintAndValuesSchema: `helm lint --strict` passes, and a typo or a
// wrong value is an error naming it, not a silent default.
func TestHelmLintAndValuesSchema(t *testing.T) {
	for _, set := range [][]string{nil, {"--set=scope.namespaces={team-a,team-b},scope.resourceLabelSelector=courier=yes,config.reloadResources={rollouts.argoproj.io},config.reloadCSI=true"}} {
		if out, err := helm(t, append([]string{"lint", "--strict", chartDir}, set...)...); err != nil {
			t.Fatalf("helm lint --strict %v: %v\n%s", set, err, out)
		}
	}
	for _, c := range []struct{ set, want string }{
		{"replica=3", "replica"},
		{"config.sourceNamespace={a}", "sourceNamespace"},
		{"config.logLevel=verbose", "logLevel"},
		{"config.reloadDebounce=soon", "reloadDebounce"},
		{"image.digest=abc", "digest"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"namespace.name=Not_A_Name", "name"},
		{"goMemLimit=lots", "goMemLimit"},
		{"config.reloadQPS=fast", "reloadQPS"},
		{"config.compat={kyverno}", "compat"},
		{"config.notifyURLs={ftp://x}", "notifyURLs"},
		{"config.notifyURLs={https:///services/TOKEN}", "notifyURLs"},
		{"config.notifyURLs={https://user@hooks.example/services/TOKEN}", "notifyURLs"},
		{"notifySecret.nam=x", "nam"},
		{`commonLabels.app\.kubernetes\.io/name=x`, "commonLabels"},
		{"topologySpreadConstraints[0].maxSkew=1", "topologySpreadConstraints"},
		{"verticalPodAutoscaler.updateMode=Always", "updateMode"},
		{"verticalPodAutoscaler.controlledResources={gpu}", "controlledResources"},
		{"verticalPodAutoscaler.minAllowed.cpus=1", "cpus"},
		{"imagePullSecrets[0].nam=regcred", "imagePullSecrets"},
		{"scope.namespaces={Team_A}", "namespaces"},
		{"scope.namespace={a}", "namespace"},
	} {
		out, err := helm(t, "template", "courier", chartDir, "--set="+c.set)
		if err == nil {
			t.Errorf("--set %s rendered without error:\n%.300s", c.set, out)
			continue
		}
		if !strings.Contains(err.Error(), "values don't meet the specifications of the schema") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("--set %s: error does not name %q as a schema violation: %v", c.set, c.want, err)
		}
	}
	// --compat and --notify-url become args; notifySecret becomes the
	// variable, read from the Secret by the kubelet.
	args, err := helm(t, "template", "courier", chartDir, "--set=config.compat={replicator,reflector}",
		"--set=config.notifyURLs={https://a.example/x,slack+https://hooks.example/y}")
	if err != nil {
		t.Fatal(err)
	}
	fromSecret, err := helm(t, "template", "courier", chartDir, "--set=notifySecret.name=hooks")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		out  []byte
		want string
	}{
		{args, "- --compat=replicator,reflector"}, {args, "- --notify-url=https://a.example/x"}, {args, "- --notify-url=slack+https://hooks.example/y"},
		{fromSecret, "name: COURIER_NOTIFY_URL\n              valueFrom:\n                secretKeyRef:\n                  name: hooks\n                  key: urls"},
	} {
		if !strings.Contains(string(c.out), c.want) {
			t.Errorf("the rendered chart lacks %q", c.want)
		}
	}
	// Both would leave the Secret's URLs unread (a flag wins over its variable).
	if _, err := helm(t, "template", "courier", chartDir, "--set=config.notifyURLs={https://a.example/x}", "--set=notifySecret.name=hooks"); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("notifyURLs and notifySecret together: %v, want a refusal", err)
	}
	// The guard policy needs Kubernetes 1.30; older clusters get a clear
	// error, or courier without the policy.
	_, err = helm(t, "template", "courier", chartDir, "--kube-version=1.29.0")
	if err == nil || !strings.Contains(err.Error(), "guardPolicy.enabled=false") {
		t.Errorf("rendering for Kubernetes 1.29 did not fail with the way out: %v", err)
	}
	if out, err := helm(t, "template", "courier", chartDir, "--kube-version=1.29.0", "--set=guardPolicy.enabled=false"); err != nil || bytes.Contains(out, []byte("ValidatingAdmissionPolicy")) {
		t.Errorf("for Kubernetes 1.29 without the guard policy: %v\n%s", err, out)
	}
}

// TestHelmInstallUpgradeRollbackUninstall installs the chart with real Helm
// into a namespace that is not courier-system and runs a courier process as
// the chart's ServiceAccount with the chart's flags (the Deployment's pods
// run on kwok nodes, which run no containers): it leads, replicates, is
// guarded by the chart's policy and reloads. Then helm upgrade rolls the
// Deployment without ever dropping below one available pod, helm rollback
// restores the first revision, and helm uninstall removes everything the
// chart made while the replicas stay.
func TestHelmInstallUpgradeRollbackUninstall(t *testing.T) {
	ctx := t.Context()
	id := testID()
	ns := "courier-helm-" + id
	// The suite's courier identity holds ClusterRole courier; the chart brings
	// its own, bound to its namespace's ServiceAccount. Restore the suite's at the end.
	courierIdentity().revokeCluster(ctx)
	t.Cleanup(func() { restoreSuiteRBAC(t) })
	uninstallAtEnd(t)
	src := newNamespace(t, "src", map[string]string{"test": id})
	dst := newNamespace(t, "dst", map[string]string{"test": id})

	out, err := helm(t, "install", "courier", chartDir, "--namespace=default", "--wait", "--timeout=120s",
		"--set=namespace.name="+ns, "--set=config.sourceNamespaces={"+src+"}", "--set=config.excludeNamespaces={kube-*}",
		"--set=commonLabels.team=platform", "--set=commonAnnotations.owner=platform-team",
		"--set=topologySpreadConstraints[0].maxSkew=1", "--set=topologySpreadConstraints[0].topologyKey=kubernetes.io/hostname",
		"--set=topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("helm install:\n%s", out)
	// commonLabels and commonAnnotations reach every kind of object,
	// those the chart writes out and those it takes from files/.
	for what, get := range map[string]func() (metav1.Object, error){
		"Namespace": func() (metav1.Object, error) { return admin().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}) },
		"Deployment": func() (metav1.Object, error) {
			return admin().AppsV1().Deployments(ns).Get(ctx, "courier", metav1.GetOptions{})
		},
		"ClusterRole": func() (metav1.Object, error) {
			return admin().RbacV1().ClusterRoles().Get(ctx, "courier", metav1.GetOptions{})
		},
		"ValidatingAdmissionPolicy": func() (metav1.Object, error) {
			return admin().AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "courier-guard", metav1.GetOptions{})
		},
	} {
		o, err := get()
		if err != nil {
			t.Errorf("%s: %v", what, err)
		} else if o.GetLabels()["team"] != "platform" || o.GetAnnotations()["owner"] != "platform-team" {
			t.Errorf("%s: labels %v, annotations %v; want commonLabels and commonAnnotations", what, o.GetLabels(), o.GetAnnotations())
		}
	}
	n, err := admin().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil || n.Labels["pod-security.kubernetes.io/enforce"] != "restricted" || n.Labels["courier.dev/replication"] != "disabled" {
		t.Fatalf("namespace %s: labels %v, %v", ns, n.GetLabels(), err)
	}
	dep, err := admin().AppsV1().Deployments(ns).Get(ctx, "courier", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := dep.Spec.Template.Spec.TopologySpreadConstraints; len(c) != 1 || c[0].TopologyKey != "kubernetes.io/hostname" {
		t.Errorf("the Deployment's topologySpreadConstraints are %+v, want the value's", c)
	}
	if dep.Status.AvailableReplicas != 2 {
		t.Errorf("helm install --wait returned with %d available replicas, want 2", dep.Status.AvailableReplicas)
	}

	// courier as the chart's ServiceAccount (only the chart's RBAC), with
	// the flags from the Deployment the chart made.
	chartSA := identity{sa: "courier", namespace: ns}
	args := append([]string{"--namespace=" + ns}, dep.Spec.Template.Spec.Containers[0].Args...)
	c := startCourierAs(t, chartSA, nil, args...)
	c.WaitReady(ctx)
	c.WaitLeader(ctx)

	createSecret(t, src, "db", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+id), withAnnotation(keyReload, "true"), withData("k", "v1"))
	eventually(t, converge, "replica in "+dst, secretIn(dst, "db", map[string][]byte{"k": []byte("v1")}))
	createDeployment(t, dst, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	g0 := settled(t, dst, "app")

	alice := clientFor(t, env.cluster.Impersonating("alice"))
	bindRole(t, dst, "alice", editRole)
	eventually(t, 10*time.Second, "the chart's guard policy denies alice's edit of the replica", func(ctx context.Context) (bool, error) {
		err := tryWrite(ctx, alice, "update", dst, "db")
		return apierrors.IsForbidden(err) && strings.Contains(err.Error(), `"override"`), nil
	})

	updateSecret(t, src, "db", func(s *corev1.Secret) { s.Data["k"] = []byte("v2") })
	eventually(t, converge, "replica updated", secretIn(dst, "db", map[string][]byte{"k": []byte("v2")}))
	rolledOutOnce(t, dst, "app", g0, "secret/db")

	// helm upgrade with a changed value rolls the Deployment one pod at a
	// time: at no moment fewer than one available.
	w, err := admin().AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=courier", ResourceVersion: dep.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if out, err = helm(t, "upgrade", "courier", chartDir, "--namespace=default", "--reuse-values", "--wait", "--timeout=120s", "--set=config.logLevel=debug"); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm upgrade:\n%s", out)
	lowest := int32(2)
	for done := false; !done; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Error {
				t.Fatalf("watch: %v", ev.Object)
			}
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok {
				continue
			}
			lowest = min(lowest, d.Status.AvailableReplicas)
			done = d.Generation > dep.Generation && d.Status.ObservedGeneration >= d.Generation &&
				d.Status.UpdatedReplicas == 2 && d.Status.AvailableReplicas == 2 && d.Status.Replicas == 2
		case <-time.After(30 * time.Second):
			t.Fatal("the upgrade's rollout did not finish within 30 s of helm upgrade --wait")
		}
	}
	if lowest < 1 {
		t.Errorf("during helm upgrade the Deployment dropped to %d available pods", lowest)
	}
	up, err := admin().AppsV1().Deployments(ns).Get(ctx, "courier", metav1.GetOptions{})
	if err != nil || !slices.Contains(up.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") {
		t.Fatalf("after helm upgrade: args %v, %v", up.Spec.Template.Spec.Containers[0].Args, err)
	}

	if out, err = helm(t, "rollback", "courier", "1", "--namespace=default", "--wait", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm rollback:\n%s", out)
	back, err := admin().AppsV1().Deployments(ns).Get(ctx, "courier", metav1.GetOptions{})
	if err != nil || slices.Contains(back.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") ||
		!cmp.Equal(back.Spec.Template.Spec.Containers[0].Args, dep.Spec.Template.Spec.Containers[0].Args) {
		t.Fatalf("after helm rollback 1: args %v, want %v (%v)", back.Spec.Template.Spec.Containers[0].Args, dep.Spec.Template.Spec.Containers[0].Args, err)
	}

	// Uninstall: courier's pods go first, then everything the chart made;
	// the replicas it wrote stay.
	c.Stop()
	if out, err = helm(t, "uninstall", "courier", "--namespace=default", "--wait", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	t.Logf("helm uninstall:\n%s", out)
	eventually(t, 90*time.Second, "namespace "+ns+" gone", func(ctx context.Context) (bool, error) {
		_, err := admin().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	ar := admin().AdmissionregistrationV1()
	if _, err := ar.ValidatingAdmissionPolicies().Get(ctx, "courier-guard", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("guard policy still there after helm uninstall: %v", err)
	}
	if _, err := admin().RbacV1().ClusterRoles().Get(ctx, "courier-override", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ClusterRole courier-override still there after helm uninstall: %v", err)
	}
	if got, err := getSecret(ctx, dst, "db"); err != nil || string(got.Data["k"]) != "v2" {
		t.Errorf("replica %s/db after helm uninstall: %v, %v; want it kept", dst, got, err)
	}
}
