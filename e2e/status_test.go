package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/courier-k8s/courier/internal/status"
)

// courierStatus runs `courier status` with the admin kubeconfig, as a user
// would from their machine, and returns its stdout.
func courierStatus(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), env.courier, append([]string{"status", "--kubeconfig=" + env.cluster.Kubeconfig}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("courier status %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// statusOf runs `courier status -o json` with s's flags and returns the
// source named name in s's source namespace.
func statusOf(t *testing.T, s replicationSetup, name string) *status.Source {
	t.Helper()
	var r status.Report
	if err := json.Unmarshal([]byte(courierStatus(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "-o", "json")), &r); err != nil {
		t.Fatal(err)
	}
	for i := range r.Sources {
		if r.Sources[i].Ref() == s.src+"/"+name {
			return &r.Sources[i]
		}
	}
	t.Fatalf("source %s/%s missing from %+v", s.src, name, r)
	return nil
}

// TestStatusReportsEverySourceAndItsConsumers builds a cluster with a
// source in sync in two namespaces, blocked in a third, missing in a fourth
// (created while courier is down) and a consuming Deployment that was
// reloaded, and checks both outputs of `courier status`.
func TestStatusReportsEverySourceAndItsConsumers(t *testing.T) {
	s := setupReplication(t)
	a := s.target(t, "a", nil)
	b := s.target(t, "b", nil)
	blocked := s.target(t, "blocked", nil)
	createSecret(t, blocked, "app-config", withData("mine", "x"))
	createSecret(t, s.src, "app-config", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("k", "1"))
	createDeployment(t, a, "web", nil, podSpec([]corev1.EnvVar{keyRef("secret", "app-config", "k")}, nil, nil))
	eventually(t, converge, "replica in "+b, secretIn(b, "app-config", map[string][]byte{"k": []byte("1")}))
	before := settled(t, a, "web")
	updateSecret(t, s.src, "app-config", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	eventually(t, converge, "replica updated in "+a, secretIn(a, "app-config", map[string][]byte{"k": []byte("2")}))
	rolledOutOnce(t, a, "web", before, "secret/app-config")

	s.courier.Stop()
	missing := s.target(t, "missing", nil)

	got := statusOf(t, s, "app-config")
	if got.Kind != "Secret" || got.Selector != "test="+s.id || got.Problem != "" ||
		got.Targets != 4 || got.InSync != 2 || got.Conflict != 1 || got.Error != 1 {
		t.Errorf("source: %+v; want Secret, 4 targets (%s %s %s %s), 2 in sync, 1 conflict, 1 error", *got, a, b, blocked, missing)
	}
	if len(got.Consumers) != 1 {
		t.Fatalf("consumers: %+v, want Deployment %s/web", got.Consumers, a)
	}
	c := got.Consumers[0]
	at, err := time.Parse(time.RFC3339, c.ReloadedAt)
	if c.Kind != "Deployment" || c.Namespace != a || c.Name != "web" || c.ReloadedFor != "secret/app-config" || err != nil || time.Since(at) > time.Minute {
		t.Errorf("consumer: %+v (reloadedAt: %v)", c, err)
	}

	table := courierStatus(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	t.Logf("courier status:\n%s", table)
	for _, want := range []string{
		"SOURCE", "IN-SYNC", "CONFLICT", "ERROR",
		s.src + "/app-config", "test=" + s.id,
		"Deployment " + a + "/web", "secret/app-config",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}

	// A source outside --source-namespaces is listed with the reason it is ignored.
	table = courierStatus(t, "--namespace="+s.courier.namespace, "--source-namespaces=nothing-here")
	if !strings.Contains(table, "not in --source-namespaces") {
		t.Errorf("an ignored source is not flagged:\n%s", table)
	}
}
