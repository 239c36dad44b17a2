package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SPEC (Reload, courier.dev/reload-min-interval; under --compat=reloader,
// Reloader's pause-period on a Deployment): at most one rollout per
// interval; changes within it are not lost: they roll out once, at its end,
// with the content of the last one. A ReloadDelayed Event says when.
func TestMinimumIntervalSpacesRolloutsAndLosesNoChange(t *testing.T) {
	// Long enough for the checks below (each rolledOutOnce waits out a
	// quiet period) to happen within it.
	const interval = 40 * time.Second
	s := setupReplication(t, "--compat=reloader", "--reload-debounce=200ms")
	ns := s.target(t, "interval", nil)
	createSecret(t, ns, "db", withData("password", "v1"))
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil)
	createDeployment(t, ns, "web", map[string]string{keyReload: "true", "courier.dev/reload-min-interval": interval.String()}, spec)
	createDeployment(t, ns, "legacy", map[string]string{"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": interval.String()}, spec)
	createDeployment(t, ns, "free", map[string]string{keyReload: "true"}, spec)
	for _, name := range []string{"web", "legacy", "free"} {
		settled(t, ns, name)
	}

	// The first change rolls out at once: nothing rolled out before.
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v2") })
	for _, name := range []string{"web", "legacy", "free"} {
		rolledOutOnce(t, ns, name, 1, "secret/db")
	}
	first, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last, err := time.Parse(time.RFC3339, first.Annotations["courier.dev/reloaded-at"])
	if err != nil {
		t.Fatal(err)
	}
	end := last.Add(interval)
	// Two more changes within the interval: the spaced ones hold, the free
	// one rolls out for each.
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v3") })
	eventually(t, converge, "ReloadDelayed on web", eventWith(ns, "web", "ReloadDelayed", "secret/db changed within courier.dev/reload-min-interval="+interval.String()))
	eventually(t, converge, "ReloadDelayed on legacy", eventWith(ns, "legacy", "ReloadDelayed", "deployment.reloader.stakater.com/pause-period="+interval.String()))
	rolledOutOnce(t, ns, "free", 2, "secret/db")
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v4") })
	rolledOutOnce(t, ns, "free", 3, "secret/db")
	for _, name := range []string{"web", "legacy"} {
		noRollout(t, ns, name, 2)
	}
	if time.Now().After(end) {
		t.Fatalf("the checks took longer than the interval (%s): nothing above was inside it", interval)
	}

	// At the interval's end, one rollout each, with the last content: the
	// same config hash as the free one, which rolled out for v4.
	free, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "free", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"web", "legacy"} {
		eventually(t, interval+10*time.Second, name+" rolled out at the interval's end", func(ctx context.Context) (bool, error) {
			n, err := replicaSets(ctx, ns, name)
			return n == 3, err
		})
		if early := time.Until(end); early > time.Second {
			t.Errorf("%s rolled out %s before the interval's end", name, early)
		}
		d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := d.Spec.Template.Annotations[keyConfigHash], free.Spec.Template.Annotations[keyConfigHash]; got != want {
			t.Errorf("%s rolled out with config hash %s, want %s (v4's)", name, got, want)
		}
	}
	for _, name := range []string{"web", "legacy"} {
		noRollout(t, ns, name, 3)
	}
	if v, _ := s.courier.MetricValue(t.Context(), `courier_reloader_skipped_total{reason="min_interval"}`); v < 2 {
		t.Errorf(`courier_reloader_skipped_total{reason="min_interval"} = %v, want at least 2 (each spaced workload held at least once)`, v)
	}
}
