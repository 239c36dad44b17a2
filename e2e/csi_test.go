package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

var (
	providerStatuses = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasspodstatuses"}
	providerClasses  = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasses"}
)

// installCSICRDs installs the Secrets Store CSI driver's CRDs (pinned in
// e2e/testdata/csi) and waits until they are served.
func installCSICRDs(t *testing.T) {
	t.Helper()
	applyCRDs(t, filepath.Join(env.root, "e2e", "testdata", "csi"))
	eventually(t, converge, "the CSI driver's kinds served", func(ctx context.Context) (bool, error) {
		_, err1 := dynamicAdmin(t).Resource(providerStatuses).List(ctx, metav1.ListOptions{Limit: 1})
		_, err2 := dynamicAdmin(t).Resource(providerClasses).List(ctx, metav1.ListOptions{Limit: 1})
		return err1 == nil && err2 == nil, nil
	})
}

// csiVolume mounts SecretProviderClass class through the driver.
func csiVolume(class string) corev1.Volume {
	return corev1.Volume{Name: "store", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver: "secrets-store.csi.k8s.io", ReadOnly: ptr.To(true), VolumeAttributes: map[string]string{"secretProviderClass": class}}}}
}

// report writes a SecretProviderClassPodStatus as the driver does after
// mounting class into pod: the version of each object it fetched.
func report(t *testing.T, ns, pod, class string, versions map[string]string) {
	t.Helper()
	var objects []any
	for id, v := range versions {
		objects = append(objects, map[string]any{"id": id, "version": v})
	}
	status := map[string]any{"podName": pod, "secretProviderClassName": class, "mounted": true,
		"targetPath": "/var/lib/kubelet/pods/" + pod + "/volumes/kubernetes.io~csi/store/mount", "objects": objects}
	name := pod + "-" + ns + "-store"
	res := dynamicAdmin(t).Resource(providerStatuses).Namespace(ns)
	u, err := res.Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		u = &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "secrets-store.csi.x-k8s.io/v1", "kind": "SecretProviderClassPodStatus",
			"metadata": map[string]any{"name": name, "namespace": ns}, "status": status}}
		if _, err := res.Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create report %s/%s: %v", ns, name, err)
		}
		return
	}
	u.Object["status"] = status
	if _, err := res.Update(t.Context(), u, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update report %s/%s: %v", ns, name, err)
	}
}

// SPEC (Reload, Secrets Store CSI driver): with --reload-csi, a workload
// mounting a SecretProviderClass through the driver consumes it; when the
// driver reports new object versions (its SecretProviderClassPodStatus),
// each opted-in consumer rolls out once — the other pods' reports of the
// same versions, and reports coming and going with pods, roll nothing out.
// courier.dev/reload covers it; under --compat=reloader Reloader's
// secretproviderclass.reloader.stakater.com/reload does, and courier
// migrate maps it. Without the permission to watch the reports, the log
// says what to grant and nothing else is held up.
func TestSecretsStoreCSIRotationRollsOutOnce(t *testing.T) {
	installCSICRDs(t)
	// courier with exactly the RBAC of manifests/ and its secrets-store-csi component.
	rules := clusterRoleRules(t, "manifests/secrets-store-csi", kustomize(t, "e2e/testdata/overlays/secrets-store-csi"), "courier-reload-csi")
	src := newNamespace(t, "csi-src", nil)
	ns := newNamespace(t, "csi", nil)
	id := identityWith(t, "courier-csi", rules)
	args := []string{"--source-namespaces=" + src, "--reload-csi", "--compat=reloader"}
	courier := startCourierAs(t, id, nil, args...)
	courier.WaitReady(t.Context())
	courier.WaitLeader(t.Context())
	createObject(t, providerClasses, "SecretProviderClass", ns, "vault-db", nil, map[string]any{
		"provider": "vault", "parameters": map[string]any{"roleName": "app"}})
	spec := podSpec(nil, nil, []corev1.Volume{csiVolume("vault-db")})
	createDeployment(t, ns, "app", map[string]string{keyReload: "true"}, spec)
	createDeployment(t, ns, "legacy", map[string]string{"secretproviderclass.reloader.stakater.com/reload": "vault-db"}, spec)
	createDeployment(t, ns, "bystander", nil, spec)
	v1 := map[string]string{"db-password": "csiversion-1", "db-user": "csiversion-1"}
	v2 := map[string]string{"db-password": "csiversion-2", "db-user": "csiversion-1"}
	report(t, ns, "app-1", "vault-db", v1)
	report(t, ns, "app-2", "vault-db", v1)
	for _, name := range []string{"app", "legacy"} {
		eventually(t, converge, "the class in "+name+"'s baseline", func(ctx context.Context) (bool, error) {
			d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			return err == nil && strings.Contains(d.Annotations[keyInputs], "secretproviderclass/vault-db="), err
		})
	}
	app, legacy := settled(t, ns, "app"), settled(t, ns, "legacy")

	// The driver rotates the first pod's mount: one rollout per consumer.
	report(t, ns, "app-1", "vault-db", v2)
	rolledOutOnce(t, ns, "app", app, "secretproviderclass/vault-db")
	rolledOutOnce(t, ns, "legacy", legacy, "secretproviderclass/vault-db")
	// The rotated pod goes first, while the other's report still holds the
	// old versions (its node has not rotated yet); a new pod's report with
	// the new ones; the other pod rotated to them: nothing more.
	if err := dynamicAdmin(t).Resource(providerStatuses).Namespace(ns).Delete(t.Context(), "app-1-"+ns+"-store", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	noRollout(t, ns, "app", app+1)
	report(t, ns, "app-3", "vault-db", map[string]string{"db-user": "csiversion-1", "db-password": "csiversion-2"})
	report(t, ns, "app-2", "vault-db", v2)
	noRollout(t, ns, "app", app+1)
	noRollout(t, ns, "legacy", legacy+1)
	noRollout(t, ns, "bystander", 1) // not opted in
	// A restart reads the newest report, which holds what the pods run.
	courier.Stop()
	courier = startCourierAs(t, id, nil, args...)
	courier.WaitLeader(t.Context())
	noRollout(t, ns, "app", app+1)

	r := courierMigrate(t)
	mapped := false
	for _, o := range r.Objects {
		if o.Kind == "Deployment" && o.Namespace == ns && o.Name == "legacy" {
			mapped = o.Add[keyReload] == "true" || o.Add[keyReloadOn] == "secretproviderclass/vault-db"
		}
	}
	if !mapped {
		t.Errorf("courier migrate does not map Reloader's secretproviderclass reload list on %s/legacy", ns)
	}

	// Each permission of the component, taken away in turn: the log names
	// the refusal and what to grant, and other reloads go on.
	courier.Stop()
	for i, verb := range []string{"list", "watch"} {
		t.Run("RBAC without "+verb, func(t *testing.T) {
			var left []rbacv1.PolicyRule
			for _, r := range rules {
				r = *r.DeepCopy()
				r.Verbs = slices.DeleteFunc(r.Verbs, func(v string) bool { return v == verb })
				left = append(left, r)
			}
			c := startCourierAs(t, identityWith(t, fmt.Sprintf("courier-csi-no-%s", verb), left),
				[]string{"KUBE_FEATURE_WatchListClient=false"}, "--source-namespaces="+src, "--reload-csi")
			c.WaitReady(t.Context())
			c.WaitLeader(t.Context())
			eventually(t, converge, "the log names the refusal and the fix", func(context.Context) (bool, error) {
				log := c.Logs()
				return strings.Contains(log, "courier may not list or watch secretproviderclasspodstatuses") &&
					strings.Contains(log, fmt.Sprintf(`cannot %s resource \"%s\"`, verb, providerStatuses.Resource)), nil
			})
			name := fmt.Sprintf("plain-%d", i)
			createSecret(t, ns, name, withData("k", "csiplain-1"))
			createDeployment(t, ns, name, map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", name, "k")}, nil, nil))
			before := settled(t, ns, name)
			updateSecret(t, ns, name, func(x *corev1.Secret) { x.Data["k"] = []byte("csiplain-2") })
			rolledOutOnce(t, ns, name, before, "secret/"+name)
			c.Stop()
		})
	}
}
