package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	r := statusReport(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	src := sourceIn(r, s.src+"/"+name)
	if src == nil {
		t.Fatalf("source %s/%s missing from %+v", s.src, name, r)
	}
	return src
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

// TestStatusTellsEachConsumersVerdict: `courier status` asks the
// reloader's decision what it would do with each consumer now, and why,
// without acting (SPEC, courier status): a consumer running what it
// consumes is up to date, one not opted in says how to opt in, one held by
// its minimum interval says until when, one opted in by its input's source
// is up to date too, and with courier stopped an input
// changed meanwhile is a rollout to come; nothing is written by asking.
func TestStatusTellsEachConsumersVerdict(t *testing.T) {
	s := setupReplication(t)
	a := s.target(t, "a", nil)
	createSecret(t, s.src, "cfg", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "1"))
	eventually(t, converge, "replica in "+a, secretIn(a, "cfg", map[string][]byte{"k": []byte("1")}))
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "cfg", "k")}, nil, nil)
	createDeployment(t, a, "auto", map[string]string{keyReload: "true"}, spec)
	createDeployment(t, a, "paced", map[string]string{keyReload: "true", "courier.dev/reload-min-interval": "1h"}, spec)
	createDeployment(t, a, "plain", nil, spec)
	// Opted in by its input's source: a replica carries no courier.dev/reload.
	createSecret(t, s.src, "tls", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("crt", "1"))
	eventually(t, converge, "replica of tls in "+a, secretIn(a, "tls", map[string][]byte{"crt": []byte("1")}))
	createDeployment(t, a, "bysource", nil, podSpec([]corev1.EnvVar{keyRef("secret", "tls", "crt")}, nil, nil))
	settled(t, a, "auto")
	settled(t, a, "paced")
	settled(t, a, "bysource")
	unsettled(t, a, "plain")

	// paced rolls out for the first change, and is held for the second.
	updateSecret(t, s.src, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	eventually(t, converge, "paced rolled out once", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, a, "paced")
		return n == 2, err
	})
	updateSecret(t, s.src, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("3") })
	eventually(t, converge, "paced held", eventWith(a, "paced", "ReloadDelayed"))
	eventually(t, converge, "auto rolled out twice", func(ctx context.Context) (bool, error) {
		n, err := replicaSets(ctx, a, "auto")
		return n == 3, err
	})

	verdicts := func() map[string]status.Verdict {
		t.Helper()
		r := statusReport(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
		out := map[string]status.Verdict{}
		var consumers []status.Consumer
		for _, name := range []string{"cfg", "tls"} {
			if src := sourceIn(r, s.src+"/"+name); src != nil {
				consumers = append(consumers, src.Consumers...)
			}
		}
		for _, c := range consumers {
			if c.Verdict == nil {
				t.Fatalf("consumer %s/%s has no verdict", c.Namespace, c.Name)
			}
			out[c.Name] = *c.Verdict
		}
		return out
	}
	got := verdicts()
	want := map[string]status.Verdict{
		"auto":     {Verdict: "up to date", Policy: "compared", Message: "its pods run what it consumes now"},
		"bysource": {Verdict: "up to date", Policy: "compared", Message: "its pods run what it consumes now"},
		"plain":    {Verdict: "not opted in", Policy: "compared", Message: `no input is opted in: annotate it courier.dev/reload: "true", name inputs in courier.dev/reload-on, or annotate an input courier.dev/reload: "true"`},
	}
	for name, w := range want {
		if got[name] != w {
			t.Errorf("%s: verdict %+v, want %+v", name, got[name], w)
		}
	}
	if v := got["paced"]; v.Verdict != "held" || v.Policy != "minimum interval" || !strings.Contains(v.Message, "secret/cfg changed within courier.dev/reload-min-interval=1h0m0s") {
		t.Errorf("paced: verdict %+v, want held by the minimum interval", v)
	}

	// With courier stopped, a change waits: status says it rolls out, and
	// asking writes nothing.
	s.courier.Stop()
	updateSecret(t, a, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("edited") })
	d, err := admin().AppsV1().Deployments(a).Get(t.Context(), "auto", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v := verdicts()["auto"]; v.Verdict != "rolls out" || v.Policy != "roll out" || v.Message != "secret/cfg changed since its pods were given their content" {
		t.Errorf("auto after its input changed: verdict %+v, want rolls out for secret/cfg", v)
	}
	table := courierStatus(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	for _, want := range []string{"VERDICT", "WHY", "rolls out", "not opted in", "held"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	after, err := admin().AppsV1().Deployments(a).Get(t.Context(), "auto", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != d.ResourceVersion {
		t.Errorf("asking status changed Deployment auto (resourceVersion %s → %s)", d.ResourceVersion, after.ResourceVersion)
	}
}

// statusReport runs `courier status -o json` with args and decodes it.
func statusReport(t *testing.T, args ...string) status.Report {
	t.Helper()
	var r status.Report
	if err := json.Unmarshal([]byte(courierStatus(t, append(args, "-o", "json")...)), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

func sourceIn(r status.Report, ref string) *status.Source {
	for i := range r.Sources {
		if r.Sources[i].Ref() == ref {
			return &r.Sources[i]
		}
	}
	return nil
}

// TestStatusKnowsTheRunningInstallation: the leader publishes its settings
// (ConfigMap courier-settings in its namespace), so `courier status` given
// no flag but the installation's namespace reports what that courier does:
// its source is in sync, not "outside --source-namespaces". A flag given to
// status wins; several installations make status list them and ask for
// --namespace; a restart with the same flags writes nothing; a
// courier-settings ConfigMap courier did not create is left alone, with a
// SettingsBlocked Event.
func TestStatusKnowsTheRunningInstallation(t *testing.T) {
	// A webhook URL is a secret: the settings name its format only.
	const hook = "--notify-url=slack+http://127.0.0.1:9/services/s3cr3t-token"
	s := setupReplication(t, "--compat=replicator", hook)
	ns := s.courier.namespace
	a := s.target(t, "a", nil)
	createSecret(t, s.src, "db", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "1"))
	eventually(t, converge, "replica in "+a, secretIn(a, "db", map[string][]byte{"k": []byte("1")}))

	r := statusReport(t, "--namespace="+ns)
	got := sourceIn(r, s.src+"/db")
	if got == nil || got.Problem != "" || got.Targets != 1 || got.InSync != 1 {
		t.Fatalf("status with only --namespace: source %+v; want in sync in 1 of 1 (courier runs with --source-namespaces=%s)", got, s.src)
	}
	if i := r.Installation; i == nil || i.Namespace != ns || i.SourceNamespaces != s.src || i.Compat != "replicator" || !strings.HasPrefix(i.Version, "courier ") || len(i.Overridden) != 0 {
		t.Errorf("installation: %+v; want %s's settings (--source-namespaces=%s --compat=replicator), none overridden", r.Installation, ns, s.src)
	}
	table := courierStatus(t, "--namespace="+ns)
	if !strings.Contains(table, "Installation "+ns+": courier ") || !strings.Contains(table, "--source-namespaces="+s.src) {
		t.Errorf("the table does not name the installation it read:\n%s", table)
	}

	// A flag given to status wins, and the report says so.
	r = statusReport(t, "--namespace="+ns, "--source-namespaces=nothing-here")
	if got := sourceIn(r, s.src+"/db"); got == nil || !strings.Contains(got.Problem, "not in --source-namespaces") {
		t.Errorf("--source-namespaces given to status: source %+v, want it outside", got)
	}
	if r.Installation == nil || strings.Join(r.Installation.Overridden, ",") != "--source-namespaces" {
		t.Errorf("installation: %+v, want --source-namespaces overridden", r.Installation)
	}

	// A restart with the same flags writes nothing.
	cm, err := admin().CoreV1().ConfigMaps(ns).Get(t.Context(), "courier-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if b := cm.Data["settings.json"]; strings.Contains(b, "s3cr3t") || strings.Contains(b, "127.0.0.1") || !strings.Contains(b, `"slack"`) {
		t.Errorf("settings: %s; want the format slack and nothing of the URL", b)
	}
	s.courier.Stop()
	again := startCourier(t, "--namespace="+ns, "--source-namespaces="+s.src, "--compat=replicator", hook)
	again.WaitLeader(t.Context())
	b := s.target(t, "b", nil)
	eventually(t, converge, "replica in "+b+" from the restarted courier", secretIn(b, "db", map[string][]byte{"k": []byte("1")}))
	if now, err := admin().CoreV1().ConfigMaps(ns).Get(t.Context(), "courier-settings", metav1.GetOptions{}); err != nil || now.ResourceVersion != cm.ResourceVersion {
		t.Errorf("a restart with the same flags rewrote the settings (resourceVersion %s → %v, %v)", cm.ResourceVersion, now.GetResourceVersion(), err)
	}

	// A second installation: status without --namespace lists both and
	// asks for one.
	other := startCourier(t, "--source-namespaces="+s.src+",elsewhere")
	other.WaitLeader(t.Context())
	eventually(t, converge, "the second installation's settings", func(ctx context.Context) (bool, error) {
		_, err := admin().CoreV1().ConfigMaps(other.namespace).Get(ctx, "courier-settings", metav1.GetOptions{})
		return err == nil, nil
	})
	cmd := exec.CommandContext(t.Context(), env.courier, "status", "--kubeconfig="+env.cluster.Kubeconfig)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), ns+" (") || !strings.Contains(string(out), other.namespace+" (") || !strings.Contains(string(out), "--namespace") {
		t.Errorf("status with two installations: %v\n%s\nwant exit 2 listing %s and %s and asking for --namespace", err, out, ns, other.namespace)
	}
	if r := statusReport(t, "--namespace="+other.namespace); r.Installation == nil || r.Installation.SourceNamespaces != s.src+",elsewhere" {
		t.Errorf("--namespace=%s: installation %+v", other.namespace, r.Installation)
	}

	// A courier-settings ConfigMap courier did not make is left alone.
	foreign := newNamespace(t, "courier", nil)
	createConfigMap(t, foreign, "courier-settings", nil, map[string]string{"mine": "x"})
	before, err := admin().CoreV1().ConfigMaps(foreign).Get(t.Context(), "courier-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	blocked := startCourier(t, "--namespace="+foreign, "--source-namespaces="+foreign)
	blocked.WaitLeader(t.Context())
	eventually(t, converge, "SettingsBlocked Event", eventWith(foreign, "courier-settings", "SettingsBlocked", "did not create it", "rename or delete it"))
	if now, err := admin().CoreV1().ConfigMaps(foreign).Get(t.Context(), "courier-settings", metav1.GetOptions{}); err != nil || now.ResourceVersion != before.ResourceVersion {
		t.Errorf("courier touched a courier-settings it did not create: %v, %v", now, err)
	}
	if !strings.Contains(blocked.Logs(), "courier status will not know this installation's flags") {
		t.Errorf("no log line says the settings were not published")
	}
}
