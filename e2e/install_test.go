package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestKubectlApplyInstallsCourier installs manifests/ as a user would, with
// `kubectl apply -k manifests/`, and checks what lands: the namespace under
// the restricted Pod Security Standard with courier's two pods admitted and
// Ready, the guard policy, the dashboard; then that a second apply changes
// nothing and `kubectl delete -k manifests/` removes it all.
func TestKubectlApplyInstallsCourier(t *testing.T) {
	ctx := t.Context()
	t.Cleanup(func() { restoreSuiteRBAC(t) }) // uninstalling removes ClusterRole courier
	out, err := kubectl(ctx, "apply", "-k", "manifests/")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl apply -k manifests/:\n%s", out)

	ns, err := admin().CoreV1().Namespaces().Get(ctx, installNamespace, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ns.Labels["pod-security.kubernetes.io/enforce"]; got != "restricted" {
		t.Errorf("namespace %s enforces Pod Security %q, want restricted", installNamespace, got)
	}

	eventually(t, 60*time.Second, "Deployment courier has 2 available replicas", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(installNamespace).Get(ctx, "courier", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 2 && d.Status.UpdatedReplicas == 2, nil
	})
	pods, err := admin().CoreV1().Pods(installNamespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=courier"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		c := p.Spec.Containers[0]
		if p.Spec.ServiceAccountName != "courier" || c.SecurityContext == nil || !ptr.Deref(c.SecurityContext.ReadOnlyRootFilesystem, false) {
			t.Errorf("pod %s: service account %q, security context %+v", p.Name, p.Spec.ServiceAccountName, c.SecurityContext)
		}
		if !envFromField(c.Env, "POD_NAMESPACE", "metadata.namespace") {
			t.Errorf("pod %s does not set POD_NAMESPACE from the downward API", p.Name)
		}
	}

	// The namespace really enforces restricted: a pod without its settings is refused.
	plain := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: installNamespace},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "x"}}},
	}
	_, err = admin().CoreV1().Pods(installNamespace).Create(ctx, plain, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "PodSecurity") {
		t.Errorf("a pod without restricted settings in %s was not refused by Pod Security admission: %v", installNamespace, err)
	}

	if _, err := admin().AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, "courier-guard", metav1.GetOptions{}); err != nil {
		t.Errorf("guard policy binding: %v", err)
	}
	for _, name := range []string{"courier-metrics"} {
		if _, err := admin().CoreV1().Services(installNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("service %s: %v", name, err)
		}
	}
	if _, err := admin().PolicyV1().PodDisruptionBudgets(installNamespace).Get(ctx, "courier", metav1.GetOptions{}); err != nil {
		t.Errorf("PodDisruptionBudget: %v", err)
	}
	cm, err := admin().CoreV1().ConfigMaps(installNamespace).Get(ctx, "courier-dashboard", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string            `json:"uid"`
		Panels []json.RawMessage `json:"panels"`
	}
	if cm.Labels["grafana_dashboard"] != "1" || json.Unmarshal([]byte(cm.Data["courier.json"]), &dash) != nil || len(dash.Panels) == 0 {
		t.Errorf("dashboard ConfigMap: labels %v, uid %q, %d panels", cm.Labels, dash.UID, len(dash.Panels))
	}

	// Applying again changes nothing: the server holds exactly what manifests/ say.
	if out, err := kubectl(ctx, "diff", "-k", "manifests/"); err != nil {
		t.Errorf("kubectl diff -k manifests/ after apply is not empty (%v):\n%s", err, out)
	}

	// Uninstall.
	if out, err = kubectl(ctx, "delete", "-k", "manifests/", "--wait=true", "--timeout=90s"); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl delete -k manifests/:\n%s", out)
	if _, err := admin().CoreV1().Namespaces().Get(ctx, installNamespace, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s still there after uninstall: %v", installNamespace, err)
	}
	if _, err := admin().AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, "courier-guard", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("guard policy still there after uninstall: %v", err)
	}
}

func envFromField(env []corev1.EnvVar, name, path string) bool {
	for _, e := range env {
		if e.Name == name && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == path {
			return true
		}
	}
	return false
}
