package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/courier-k8s/courier/e2e/cluster"
)

// promTool finds a Prometheus program (`make prometheus` installs Debian's).
func promTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is not installed: run `make prometheus` (Debian package prometheus): %v", name, err)
	}
	return path
}

// writeAlertRules writes the spec of manifests/monitoring's PrometheusRule,
// a plain Prometheus rule file, to dir/courier-rules.yaml.
func writeAlertRules(t *testing.T, dir string) string {
	t.Helper()
	objs, err := renderManifests(t.Context(), "manifests/monitoring")
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if u, ok := o.(*unstructured.Unstructured); ok && u.GetKind() == "PrometheusRule" {
			spec, err := json.Marshal(u.Object["spec"])
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "courier-rules.yaml")
			if err := os.WriteFile(path, spec, 0o644); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	t.Fatal("manifests/monitoring has no PrometheusRule")
	return ""
}

// TestAlertRules checks the alert rules with promtool and runs their unit
// tests (e2e/testdata/alerts_test.yaml): each alert fires when it should
// and not before.
func TestAlertRules(t *testing.T) {
	promtool := promTool(t, "promtool")
	dir := t.TempDir()
	rules := writeAlertRules(t, dir)
	tests, err := os.ReadFile(filepath.Join(env.root, "e2e/testdata/alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), tests, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		t.Logf("promtool %s:\n%s", strings.Join(args, " "), out)
	}
}

// dashboardQueries returns every PromQL query of the Grafana dashboard by
// panel title, with Grafana's variables replaced as Grafana would.
func dashboardQueries(t *testing.T, job, rateInterval string) map[string][]string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, "manifests/dashboards/courier.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			q := strings.ReplaceAll(tg.Expr, "$job", job)
			q = strings.ReplaceAll(q, "$__rate_interval", rateInterval)
			out[p.Title] = append(out[p.Title], q)
		}
	}
	return out
}

// prometheus is a Prometheus server started by a test.
type prometheus struct {
	url string
	cmd *exec.Cmd
}

// startPrometheus runs Prometheus on loopback, scraping courier every second
// as job courier-metrics (the job the ServiceMonitor gives) and evaluating
// the alert rules.
func startPrometheus(t *testing.T, target, rules string) *prometheus {
	t.Helper()
	bin := promTool(t, "prometheus")
	dir := t.TempDir()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: courier-metrics
    static_configs:
      - targets: [%q]
`, rules, target)
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &prometheus{url: "http://127.0.0.1:" + strconv.Itoa(port)}
	p.cmd = exec.Command(bin, "--config.file="+cfgPath, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--log.level=warn")
	logf, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("prometheus log:\n%s", b)
		}
	})
	eventually(t, 30*time.Second, "prometheus ready", func(ctx context.Context) (bool, error) {
		resp, err := http.Get(p.url + "/-/ready")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	return p
}

// api GETs a Prometheus HTTP API path and decodes its data into out.
func (p *prometheus) api(ctx context.Context, path string, params url.Values, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var body struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return err
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s", path, body.Error)
	}
	return json.Unmarshal(body.Data, out)
}

// query runs an instant query and returns its sample values.
func (p *prometheus) query(ctx context.Context, q string) ([]float64, error) {
	var data struct {
		Result []struct {
			Value [2]any `json:"value"`
		} `json:"result"`
	}
	if err := p.api(ctx, "/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	var out []float64
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// TestDashboardQueriesReturnData scrapes courier with a real Prometheus
// while a scripted workload makes courier do each thing the dashboard shows
// (replicate, update, conflict, revert, back off, restore, reload, reject a
// selector), then runs every panel's query: each must return at least one
// number. The alert rules are loaded too and must all evaluate.
func TestDashboardQueriesReturnData(t *testing.T) {
	s := setupReplication(t, "--reload-debounce=200ms")
	rules := writeAlertRules(t, t.TempDir())
	prom := startPrometheus(t, s.courier.addr, rules)
	// rate() sees only increases between two scrapes: start after the first.
	eventually(t, 30*time.Second, "prometheus scraped courier", func(ctx context.Context) (bool, error) {
		v, err := prom.query(ctx, `up{job="courier-metrics"} == 1`)
		return len(v) == 1, err
	})

	a := s.target(t, "a", nil)
	blocked := s.target(t, "blocked", nil)
	createSecret(t, blocked, "app", withData("mine", "x"))
	createSecret(t, s.src, "app", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("k", "1"))
	createDeployment(t, a, "web", nil, podSpec([]corev1.EnvVar{keyRef("secret", "app", "k")}, nil, nil))
	eventually(t, converge, "replica", secretIn(a, "app", map[string][]byte{"k": []byte("1")}))
	before := settled(t, a, "web")
	updateSecret(t, s.src, "app", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	rolledOutOnce(t, a, "web", before, "secret/app")
	for i := range 6 { // one more than the revert budget: five reverted, then contested
		updateSecret(t, a, "app", func(x *corev1.Secret) { x.Data["k"] = []byte(fmt.Sprint("edit-", i)) })
		if i < 5 {
			eventually(t, converge, fmt.Sprintf("edit %d reverted", i+1), secretIn(a, "app", map[string][]byte{"k": []byte("2")}))
		}
	}
	createSecret(t, s.src, "kept", withLabel(keyProtect, "true"), withData("k", "v"))
	eventually(t, converge, "the guard backed up the protected source", func(ctx context.Context) (bool, error) {
		_, err := getSecret(ctx, s.src, "courier-backup.kept")
		return err == nil, nil
	})
	deleteSecret(t, s.src, "kept")
	eventually(t, converge, "protected source restored", secretIn(s.src, "kept", map[string][]byte{"k": []byte("v")}))
	createSecret(t, s.src, "broken", withAnnotation(keyReplicateTo, "(("))
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_guard_replicas_contested_total{kind="Secret"}`: 1})
	time.Sleep(3 * time.Second) // a few scrapes after the last event

	for title, queries := range dashboardQueries(t, "courier-metrics", "1m") {
		for _, q := range queries {
			vals, err := prom.query(t.Context(), q)
			numbers := 0
			for _, v := range vals {
				if !math.IsNaN(v) {
					numbers++
				}
			}
			if err != nil || numbers == 0 {
				t.Errorf("panel %q: query %s returned %v (%v)", title, q, vals, err)
				continue
			}
			t.Logf("panel %q: %s → %v", title, q, vals)
		}
	}

	var rulesData struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := prom.api(t.Context(), "/api/v1/rules", nil, &rulesData); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, g := range rulesData.Groups {
		for _, r := range g.Rules {
			n++
			if r.Health != "ok" {
				t.Errorf("alert rule %s: health %q, %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if n == 0 {
		t.Error("Prometheus loaded no alert rules")
	}
}
