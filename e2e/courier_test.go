package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-k8s/courier/e2e/cluster"
)

// courierProcess is one courier daemon started by a test.
type courierProcess struct {
	t         *testing.T
	namespace string // --namespace: its Lease, and its installation's name
	cmd       *exec.Cmd
	addr      string // metrics address, 127.0.0.1:port
	logPath   string
	done      chan struct{}
	err       error
}

// startCourier runs courier against the test cluster as its ServiceAccount,
// with the RBAC of manifests/, and args appended to defaults a test can
// override (later flags win). Unless args name one, courier gets a namespace
// of its own (its Lease and default source namespace), so tests never share a
// leader. It is stopped with SIGTERM when the test ends, and its log is
// printed if the test failed.
func startCourier(t *testing.T, args ...string) *courierProcess {
	t.Helper()
	return startCourierAs(t, courierIdentity(), nil, args...)
}

// startCourierAs is startCourier as id, whose cluster-wide RBAC the caller
// has granted, with extra environment variables; it grants id's leader Role
// in courier's namespace.
func startCourierAs(t *testing.T, id identity, extraEnv []string, args ...string) *courierProcess {
	t.Helper()
	return startCourierFrom(t, env.courier, id, extraEnv, args...)
}

// startCourierFrom is startCourierAs running the courier binary bin, e.g.
// the one a release's image holds.
func startCourierFrom(t *testing.T, bin string, id identity, extraEnv []string, args ...string) *courierProcess {
	t.Helper()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &courierProcess{t: t, addr: "127.0.0.1:" + strconv.Itoa(port), done: make(chan struct{})}
	p.logPath = filepath.Join(t.TempDir(), "courier.log")
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	ns := flagValue(args, "namespace")
	if ns == "" {
		ns = newNamespace(t, "courier", nil)
	}
	p.namespace = ns
	if err := id.grantLeader(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	defaults := []string{
		"--namespace=" + ns,
		"--kubeconfig=" + writeKubeconfig(t, id),
		"--metrics-addr=" + p.addr,
		"--log-level=debug",
	}
	p.cmd = exec.Command(bin, append(defaults, args...)...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	// A race-enabled binary sleeps 1 s at exit by default; 100 ms is enough
	// for late reports and keeps shutdown-time assertions meaningful.
	p.cmd.Env = append(append(os.Environ(), "GORACE=atexit_sleep_ms=100"), extraEnv...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		var state string
		if t.Failed() && !p.Exited() {
			state = p.queueState()
		}
		p.Stop()
		if t.Failed() {
			t.Logf("courier log (%s):\n%s%s", p.addr, p.Logs(), state)
		}
	})
	return p
}

// flagValue is the value of the last --name=value in args, or "".
func flagValue(args []string, name string) string {
	v := ""
	for _, a := range args {
		if after, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			v = after
		}
	}
	return v
}

// Logs returns everything courier wrote so far.
func (p *courierProcess) Logs() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// Signal sends sig to courier.
func (p *courierProcess) Signal(sig syscall.Signal) {
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Errorf("signal %v to courier: %v", sig, err)
	}
}

// Exited reports whether courier has exited.
func (p *courierProcess) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Wait waits up to timeout for courier to exit and returns its exit code
// (-1 if it did not exit in time).
func (p *courierProcess) Wait(timeout time.Duration) int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		return -1
	}
}

// Stop ends courier (SIGTERM, then SIGKILL after 10 s) and fails the test if
// the race detector reported a data race in it. Safe to call twice.
func (p *courierProcess) Stop() {
	select {
	case <-p.done:
	default:
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		if p.Wait(10*time.Second) == -1 {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	logs := p.Logs()
	if strings.Contains(logs, "WARNING: DATA RACE") {
		p.t.Errorf("the race detector found a data race in courier; see its log")
	}
	noValuesIn(p.t, "courier's log", logs)
}

// queueState is what a failed test's courier was still working on: its
// work queues and API requests, from /metrics.
func (p *courierProcess) queueState() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, body, err := p.get(ctx, "/metrics")
	if err != nil {
		return fmt.Sprintf("\n(metrics at failure: %v)", err)
	}
	shown := []string{"courier_workqueue_depth", "courier_workqueue_unfinished", "courier_workqueue_longest",
		"courier_kube_client_requests_total", "courier_replicator_replicas", "courier_leader"}
	var b strings.Builder
	b.WriteString("\nmetrics at failure:\n")
	for line := range strings.Lines(body) {
		if slices.ContainsFunc(shown, func(prefix string) bool { return strings.HasPrefix(line, prefix) }) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// get fetches path from courier's metrics server.
func (p *courierProcess) get(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// WaitReady waits until /readyz answers 200.
func (p *courierProcess) WaitReady(ctx context.Context) {
	p.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, fmt.Errorf("courier exited: %v", p.err)
		default:
		}
		code, body, err := p.get(ctx, "/readyz")
		last = fmt.Sprintf("%d %s %v", code, body, err)
		return code == http.StatusOK, nil
	})
	if err != nil {
		p.t.Fatalf("courier not ready (last /readyz: %s): %v", last, err)
	}
}

// Metrics returns the /metrics text.
func (p *courierProcess) Metrics(ctx context.Context) string {
	p.t.Helper()
	code, body, err := p.get(ctx, "/metrics")
	if err != nil || code != http.StatusOK {
		p.t.Fatalf("GET /metrics: %d %v", code, err)
	}
	return body
}

// newNamespace creates a namespace named prefix-<random> with labels and
// deletes it when the test ends.
func newNamespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}
	got, err := env.cluster.Client.CoreV1().Namespaces().Create(t.Context(), ns, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	madeBy.Lock()
	if names, ok := madeBy.namespaces[topLevel(t)]; ok { // the test waits for them
		madeBy.namespaces[topLevel(t)] = append(names, got.Name)
	}
	madeBy.Unlock()
	t.Cleanup(func() {
		noValuesInEvents(t, got.Name)
		_ = env.cluster.Client.CoreV1().Namespaces().Delete(context.Background(), got.Name, metav1.DeleteOptions{})
	})
	return got.Name
}

// madeBy is the namespaces newNamespace made for the top-level tests that
// called namespacesGoneAtCleanup, until they end.
var madeBy = struct {
	sync.Mutex
	namespaces map[string][]string
}{namespaces: map[string][]string{}}

func topLevel(t *testing.T) string { name, _, _ := strings.Cut(t.Name(), "/"); return name }

// namespacesGoneAtCleanup makes t wait, when it ends, until every namespace
// it made is gone (up to two minutes; it does not fail if not). A
// namespace's deletion is otherwise not waited for. Call it first in a test
// that leaves many namespaces or large objects: kube-controller-manager's
// namespace controller deletes a namespace's every kind of object, which
// with dozens of namespaces loads the API server for a minute, and every
// courier the next tests of the process start lists the objects left (after
// the dashboard test's 47 namespaces and 32 MiB of sources, the lost-answer
// tests met API requests timing out).
func namespacesGoneAtCleanup(t *testing.T) {
	madeBy.Lock()
	madeBy.namespaces[topLevel(t)] = []string{}
	madeBy.Unlock()
	t.Cleanup(func() { // registered first, so run after every namespace's deletion
		madeBy.Lock()
		names := madeBy.namespaces[topLevel(t)]
		delete(madeBy.namespaces, topLevel(t))
		madeBy.Unlock()
		start := time.Now()
		err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			for _, ns := range names {
				if _, err := env.cluster.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
			return true, nil
		})
		t.Logf("its %d namespaces gone after %s (%v)", len(names), time.Since(start).Round(time.Second), err)
	})
}

// contentDeletedAtCleanup deletes the Secrets and ConfigMaps of ns when t
// ends and waits (up to three minutes) until none is left, for a test that
// leaves many or large ones: every courier the next tests of the process
// start would list them, and the namespace controller takes a minute to get
// to them. DeleteCollection alone is not enough: with 20,000 Secrets its
// request timed out while the API server went on deleting, and the next
// test's courier did not finish its first list within 30 s.
func contentDeletedAtCleanup(t *testing.T, ns string) {
	t.Cleanup(func() {
		ctx := context.Background()
		core := env.cluster.Client.CoreV1()
		_ = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			// Not kube-root-ca.crt, which kube-controller-manager puts back at once.
			ours := metav1.ListOptions{FieldSelector: "metadata.name!=kube-root-ca.crt"}
			_ = core.Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, ours)
			_ = core.ConfigMaps(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, ours)
			ours.Limit = 1
			secrets, err1 := core.Secrets(ns).List(ctx, ours)
			configMaps, err2 := core.ConfigMaps(ns).List(ctx, ours)
			return err1 == nil && err2 == nil && len(secrets.Items) == 0 && len(configMaps.Items) == 0, nil
		})
	})
}

// WaitLeader waits until courier holds its Lease.
func (p *courierProcess) WaitLeader(ctx context.Context) {
	p.t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, p.isLeader); err != nil {
		p.t.Fatalf("courier never became leader: %v", err)
	}
}

// MetricValue is the value of the sample series (name and labels exactly as
// /metrics prints them, e.g. `courier_replicator_reverts_total{kind="Secret"}`).
func (p *courierProcess) MetricValue(ctx context.Context, series string) (float64, bool) {
	_, body, err := p.get(ctx, "/metrics")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return f, err == nil
		}
	}
	return 0, false
}

// WaitMetricsExactly waits until every series in want has exactly its
// value, then checks that they still have after the suite's quiet period: a
// counter passing through a value on its way up fails.
func (p *courierProcess) WaitMetricsExactly(ctx context.Context, want map[string]float64) {
	p.t.Helper()
	got := map[string]float64{}
	all := func(ctx context.Context) (bool, error) {
		ok := true
		for series, w := range want {
			v, found := p.MetricValue(ctx, series)
			got[series] = v
			ok = ok && found && v == w
		}
		return ok, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, all); err != nil {
		p.t.Fatalf("metrics %v never reached %v: %v", got, want, err)
	}
	time.Sleep(quiet)
	if ok, _ := all(ctx); !ok {
		p.t.Fatalf("metrics %v after a quiet %s, want %v", got, quiet, want)
	}
}
