package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SPEC (Reload, circuit breaker): an input whose content changes more than
// --reload-storm-changes times within --reload-storm-window causes no
// rollout (Warning ReloadSuppressed on it and on its consumers,
// courier_reloader_suppressed_inputs), other inputs are not held up, and
// once it is quiet for a window its consumers roll out once, with its last
// content.
func TestAFlappingInputStopsCausingRolloutsUntilQuiet(t *testing.T) {
	const window = 20 * time.Second
	s := setupReplication(t, "--reload-storm-changes=2", "--reload-storm-window="+window.String(), "--reload-debounce=200ms")
	ns := s.target(t, "storm", nil)
	createSecret(t, ns, "cert", withData("tls.crt", "v1"))
	createSecret(t, ns, "db", withData("password", "p1"))
	createDeployment(t, ns, "web", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "cert", "tls.crt")}, nil, nil))
	createDeployment(t, ns, "api", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))
	settled(t, ns, "web")
	settled(t, ns, "api")

	// Two changes: two rollouts.
	for i, v := range []string{"v2", "v3"} {
		updateSecret(t, ns, "cert", func(x *corev1.Secret) { x.Data["tls.crt"] = []byte(v) })
		rolledOutOnce(t, ns, "web", 1+i, "secret/cert")
	}
	// A third within the window trips the breaker; a fourth is held too.
	updateSecret(t, ns, "cert", func(x *corev1.Secret) { x.Data["tls.crt"] = []byte("v4") })
	eventually(t, converge, "ReloadSuppressed on the Secret", eventWith(ns, "cert", "ReloadSuppressed", "changed more than 2 times within 20s"))
	eventually(t, converge, "ReloadSuppressed on web", eventWith(ns, "web", "ReloadSuppressed", "secret/cert changed, but changes too often"))
	updateSecret(t, ns, "cert", func(x *corev1.Secret) { x.Data["tls.crt"] = []byte("v5") })
	lastChange := time.Now()
	if v, _ := s.courier.MetricValue(t.Context(), "courier_reloader_suppressed_inputs"); v != 1 {
		t.Errorf("courier_reloader_suppressed_inputs = %v, want 1", v)
	}
	// Another input is not held up.
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("p2") })
	rolledOutOnce(t, ns, "api", 1, "secret/db")
	noRollout(t, ns, "web", 3)

	// Quiet for a window: one rollout, with v5.
	eventually(t, window+10*time.Second, "web rolled out once the input is quiet", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, ns, "web")
		return n == 4, err
	})
	if early := window - time.Since(lastChange); early > time.Second {
		t.Errorf("web rolled out %s before the input was quiet for a window", early)
	}
	noRollout(t, ns, "web", 4)
	d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Annotations[keyReloadedFor] != "secret/cert" {
		t.Errorf("reloaded-for %q", d.Annotations[keyReloadedFor])
	}
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{"courier_reloader_suppressed_inputs": 0})
	// It resumed: the next change rolls out at once.
	updateSecret(t, ns, "cert", func(x *corev1.Secret) { x.Data["tls.crt"] = []byte("v6") })
	rolledOutOnce(t, ns, "web", 4, "secret/cert")
}
