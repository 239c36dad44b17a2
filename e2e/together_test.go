package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// editTemplate changes the pod template of Deployment ns/name as its owner
// would (a Helm upgrade, kubectl apply): a new value of one annotation.
func editTemplate(t *testing.T, ns, name, release string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"example.com/release":%q}}}}}`, release)
	if _, err := admin().AppsV1().Deployments(ns).Patch(t.Context(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// SPEC (Reload, no second rollout): an upgrade that changes a consumed
// input and then the workload's pod template, within the debounce window,
// rolls out once, by the template's change, whose pods read the new content;
// courier records the new baseline without a rollout of its own. A template
// changed first, before the input, is not enough: pods it started may hold
// the old content, so courier rolls out after it.
func TestInputThenTemplateChangeRollsOutOnce(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "together", nil)
	createSecret(t, ns, "db", withData("password", "v1"))
	createSecret(t, ns, "cfg", withData("level", "quiet-7f3a"))
	createDeployment(t, ns, "web", map[string]string{keyReload: "true"},
		podSpec([]corev1.EnvVar{keyRef("secret", "db", "password"), keyRef("secret", "cfg", "level")}, nil, nil))
	settled(t, ns, "web")

	// Helm's order: the Secret, then the Deployment (courier sees the
	// Secret's change first: the pause only orders two watches).
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v2") })
	time.Sleep(300 * time.Millisecond)
	editTemplate(t, ns, "web", "2")
	eventually(t, converge, "the upgrade's own rollout", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, "web")
		return n == 2, err
	})
	noRollout(t, ns, "web", 2)
	d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Annotations["courier.dev/reloaded-for"] != "" || d.Spec.Template.Annotations[keyConfigHash] != "" {
		t.Errorf("courier rolled out on top of the upgrade: reloaded-for %q, config-hash %q", d.Annotations["courier.dev/reloaded-for"], d.Spec.Template.Annotations[keyConfigHash])
	}
	// The baseline took v2 in: the next change rolls out once.
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v3") })
	rolledOutOnce(t, ns, "web", 2, "secret/db")
	noRollout(t, ns, "web", 3)

	// The other order: the template first, then the input: courier rolls
	// out after the template's own rollout.
	editTemplate(t, ns, "web", "3")
	eventually(t, converge, "the template's own rollout", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, "web")
		return n == 4, err
	})
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v4") })
	rolledOutOnce(t, ns, "web", 4, "secret/db")
	noRollout(t, ns, "web", 5)

	// An input, the template, then another input, all within the debounce:
	// the template's rollout may have started pods before the second
	// change, so courier rolls out for it.
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v5") })
	time.Sleep(300 * time.Millisecond)
	editTemplate(t, ns, "web", "4")
	time.Sleep(300 * time.Millisecond)
	updateSecret(t, ns, "cfg", func(x *corev1.Secret) { x.Data["level"] = []byte("loud-9c1e") })
	eventually(t, converge, "the template's rollout and courier's", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, "web")
		return n == 7, err
	})
	noRollout(t, ns, "web", 7)
	if v, _ := s.courier.MetricValue(t.Context(), `courier_reloader_skipped_total{reason="template_changed"}`); v != 1 {
		t.Errorf(`courier_reloader_skipped_total{reason="template_changed"} = %v, want 1`, v)
	}
}

// SPEC (Reload, no second rollout): "first" is the order of the writes, not
// the order courier's caches show them in. A template change written before
// the input's change, but seen by courier after it (the proxy holds the
// Deployments' watch events back), started pods that may hold the old
// content: courier rolls out after it. Before the fix it took the template's
// rollout for one carrying the change, and rolled nothing out.
func TestATemplateChangeWrittenFirstButSeenAfterTheInputsRollsOut(t *testing.T) {
	fp := newFaultProxy(t)
	ns := newNamespace(t, "seenlater", nil)
	createSecret(t, ns, "db", withData("password", "v1"))
	createDeployment(t, ns, "web", map[string]string{keyReload: "true"},
		podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))
	p := startCourierFrom(t, env.courier, courierIdentity(), nil, "--namespace="+ns,
		"--kubeconfig="+fp.kubeconfig(t, courierIdentity()), "--reload-debounce=4s")
	p.WaitLeader(t.Context())
	settled(t, ns, "web")

	fp.stall("deployments", 2*time.Second)
	editTemplate(t, ns, "web", "2")
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v2") })
	// courier sees the Secret's change at once and the template's up to
	// two seconds later, both within the debounce; after the template's own
	// rollout (the second ReplicaSet) it rolls out once, for secret/db.
	rolledOutOnce(t, ns, "web", 2, "secret/db")
	if v, _ := p.MetricValue(t.Context(), `courier_reloader_skipped_total{reason="template_changed"}`); v != 0 {
		t.Errorf(`courier_reloader_skipped_total{reason="template_changed"} = %v, want 0`, v)
	}
}
