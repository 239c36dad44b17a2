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
	url, config, rules string
	cmd                *exec.Cmd
}

// startPrometheus runs Prometheus on loopback, scraping the targets (courier
// processes' metrics addresses) every second as job courier-metrics (the job
// the ServiceMonitor gives) and evaluating the alert rules every second.
func startPrometheus(t *testing.T, rules string, targets ...string) *prometheus {
	t.Helper()
	bin := promTool(t, "prometheus")
	dir := t.TempDir()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &prometheus{url: "http://127.0.0.1:" + strconv.Itoa(port), config: filepath.Join(dir, "prometheus.yml"), rules: rules}
	p.writeConfig(t, targets)
	p.cmd = exec.Command(bin, "--config.file="+p.config, "--storage.tsdb.path="+filepath.Join(dir, "data"),
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
	p.waitUp(t, targets)
	return p
}

func (p *prometheus) writeConfig(t *testing.T, targets []string) {
	t.Helper()
	quoted := make([]string, len(targets))
	for i, tg := range targets {
		quoted[i] = strconv.Quote(tg)
	}
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: courier-metrics
    static_configs:
      - targets: [%s]
`, p.rules, strings.Join(quoted, ", "))
	if err := os.WriteFile(p.config, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
}

// scrape makes Prometheus scrape these targets from now on (its
// configuration reloaded on SIGHUP) and waits until it has.
func (p *prometheus) scrape(t *testing.T, targets ...string) {
	t.Helper()
	p.writeConfig(t, targets)
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	p.waitUp(t, targets)
}

// waitUp waits until Prometheus has scraped each target once: rate() sees
// only increases between two scrapes.
func (p *prometheus) waitUp(t *testing.T, targets []string) {
	t.Helper()
	for _, tg := range targets {
		eventually(t, 30*time.Second, "prometheus scraped "+tg, func(ctx context.Context) (bool, error) {
			v, err := p.query(ctx, fmt.Sprintf(`up{job="courier-metrics", instance=%q} == 1`, tg))
			return len(v) == 1, err
		})
	}
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

// sample is one series of an instant query's answer.
type sample struct {
	labels map[string]string
	value  float64
}

// samples runs an instant query.
func (p *prometheus) samples(ctx context.Context, q string) ([]sample, error) {
	var data struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Value  [2]any            `json:"value"`
		} `json:"result"`
	}
	if err := p.api(ctx, "/api/v1/query", url.Values{"query": {q}}, &data); err != nil {
		return nil, err
	}
	var out []sample
	for _, r := range data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, sample{r.Metric, v})
	}
	return out, nil
}

// query runs an instant query and returns its sample values.
func (p *prometheus) query(ctx context.Context, q string) ([]float64, error) {
	ss, err := p.samples(ctx, q)
	var out []float64
	for _, s := range ss {
		out = append(out, s.value)
	}
	return out, err
}

// value is the value of the one series of q's answer whose labels include
// labels; NaN when there is none (no data is no movement).
func (p *prometheus) value(ctx context.Context, q string, labels map[string]string) (float64, error) {
	ss, err := p.samples(ctx, q)
	if err != nil {
		return math.NaN(), err
	}
	found := math.NaN()
	for _, s := range ss {
		match := true
		for k, v := range labels {
			match = match && s.labels[k] == v
		}
		if match {
			if !math.IsNaN(found) {
				return math.NaN(), fmt.Errorf("%s: more than one series with %v", q, labels)
			}
			found = s.value
		}
	}
	return found, nil
}

// alertState is "pending", "firing", or "" when the alert is not active.
func (p *prometheus) alertState(ctx context.Context, name string) (string, error) {
	var data struct {
		Alerts []struct {
			Labels map[string]string `json:"labels"`
			State  string            `json:"state"`
		} `json:"alerts"`
	}
	if err := p.api(ctx, "/api/v1/alerts", nil, &data); err != nil {
		return "", err
	}
	state := ""
	for _, a := range data.Alerts {
		if a.Labels["alertname"] == name && (state == "" || a.State == "firing") {
			state = a.State
		}
	}
	return state, nil
}

// alertRules is the name of every alert rule Prometheus loaded; each must
// evaluate without error.
func (p *prometheus) alertRules(t *testing.T) []string {
	t.Helper()
	var data struct {
		Groups []struct {
			Rules []struct {
				Name      string `json:"name"`
				Health    string `json:"health"`
				LastError string `json:"lastError"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := p.api(t.Context(), "/api/v1/rules", nil, &data); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, g := range data.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Name)
			if r.Health != "ok" {
				t.Errorf("alert rule %s: health %q, %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	if len(names) == 0 {
		t.Fatal("Prometheus loaded no alert rules")
	}
	return names
}
