package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// stats are the median and 99th percentile of a sample, in seconds, and the
// sample itself in the order it was measured. An empty sample (N = 0: every
// repetition invalid) has no median; its zeros are not measurements, and
// readers look at N first (JSON has no NaN).
type stats struct {
	N       int       `json:"n"`
	Median  float64   `json:"median"`
	P99     float64   `json:"p99"`
	Samples []float64 `json:"samples,omitempty"`
}

func summarize(xs []float64) stats {
	if len(xs) == 0 {
		return stats{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	// Nearest rank: with fewer than 100 samples the p99 is the maximum, and
	// the report says so.
	p99 := s[int(math.Ceil(0.99*float64(len(s))))-1]
	return stats{N: len(s), Median: med, P99: p99, Samples: xs}
}

// median is the sample's median for a report, "-" when there is none.
func (s stats) median() string {
	if s.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3f", s.Median)
}

// divide pairs a and b by index: a[i] / b[i].
func divide(a, b []float64) []float64 {
	out := make([]float64, min(len(a), len(b)))
	for i := range out {
		out[i] = a[i] / b[i]
	}
	return out
}

// writes are kube-apiserver's own counts of successful writes, from
// apiserver_request_total.
type writes map[string]float64 // "VERB resource[/subresource]" → count

func apiserverWrites(ctx context.Context, c kubernetes.Interface) (writes, error) {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	w := writes{}
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `code="2`) {
			continue
		}
		verb, resource, sub := label(line, "verb"), label(line, "resource"), label(line, "subresource")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		if sub != "" {
			resource += "/" + sub
		}
		v, _ := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		w[verb+" "+resource] += v
	}
	return w, sc.Err()
}

func label(line, name string) string {
	i := strings.Index(line, name+`="`)
	if i < 0 {
		return ""
	}
	rest := line[i+len(name)+2:]
	return rest[:strings.IndexByte(rest, '"')]
}

// minus is w − before, keeping only what changed.
func (w writes) minus(before writes) writes {
	out := writes{}
	for k, v := range w {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// ofData sums the writes to the kinds the dataset holds, subresources included.
func (w writes) ofData() float64 {
	var s float64
	for k, v := range w {
		resource := strings.SplitN(strings.Fields(k)[1], "/", 2)[0]
		switch resource {
		case "secrets", "configmaps", "namespaces", "deployments", "replicasets", "pods":
			s += v
		}
	}
	return s
}

// courierKinds lists every write to the objects courier replicates and the
// workloads it rolls, whatever verb a wrong courier would use. Not counted:
// Events (one Reloaded per rollout, by design), the Lease, and status
// subresources (the Deployment controller's).
var courierKinds = func() []string {
	var out []string
	for _, v := range []string{"POST", "PUT", "PATCH", "APPLY", "DELETE"} {
		for _, r := range []string{"secrets", "configmaps", "deployments", "statefulsets", "daemonsets", "cronjobs"} {
			out = append(out, v+" "+r)
		}
	}
	return out
}()

// ofCourier sums the writes of courierKinds.
func (w writes) ofCourier() float64 { return w.get(courierKinds...) }

func (w writes) get(keys ...string) float64 {
	var s float64
	for _, k := range keys {
		s += w[k]
	}
	return s
}

// watchUntil watches objects from now on and records, per object, the first
// time done(obj) holds. It returns a function that waits until want objects
// are done (or timeout) and returns when the last one was seen, and how many
// were. A watch the API server closes (it drops slow watchers under load) is
// opened again from the last resourceVersion seen, or after a relist.
func watchUntil(ctx context.Context, list func(context.Context, metav1.ListOptions) (string, []runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), opts metav1.ListOptions,
	done func(runtime.Object) (string, bool)) (func(want int, timeout time.Duration) (time.Time, int), error) {
	rv, _, err := list(ctx, opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	seen := map[string]time.Time{}
	var last time.Time
	changed := make(chan struct{}, 1)
	record := func(obj runtime.Object) {
		id, ok := done(obj)
		if !ok {
			return
		}
		now := time.Now()
		mu.Lock()
		if _, dup := seen[id]; !dup {
			seen[id], last = now, now
		}
		mu.Unlock()
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	go func() {
		for ctx.Err() == nil {
			o := opts
			o.ResourceVersion, o.AllowWatchBookmarks = rv, true
			w, err := watchFn(ctx, o)
			if err != nil {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					rv = "" // expired: relist below
					break
				}
				if m, err := meta.Accessor(ev.Object); err == nil {
					rv = m.GetResourceVersion()
				}
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					record(ev.Object)
				}
			}
			w.Stop()
			if rv == "" && ctx.Err() == nil {
				var objs []runtime.Object
				if rv, objs, err = list(ctx, opts); err != nil {
					rv = ""
					continue
				}
				for _, obj := range objs {
					record(obj)
				}
			}
		}
	}()
	return func(want int, timeout time.Duration) (time.Time, int) {
		defer cancel()
		deadline := time.After(timeout)
		for {
			mu.Lock()
			n, l := len(seen), last
			mu.Unlock()
			if n >= want {
				return l, n
			}
			select {
			case <-changed:
			case <-deadline:
				return l, n
			}
		}
	}, nil
}

// lister adapts a typed List to what watchUntil needs: the list's
// resourceVersion and its items.
func lister[L runtime.Object](list func(context.Context, metav1.ListOptions) (L, error)) func(context.Context, metav1.ListOptions) (string, []runtime.Object, error) {
	return func(ctx context.Context, o metav1.ListOptions) (string, []runtime.Object, error) {
		l, err := list(ctx, o)
		if err != nil {
			return "", nil, err
		}
		objs, err := meta.ExtractList(l)
		if err != nil {
			return "", nil, err
		}
		m, err := meta.ListAccessor(l)
		if err != nil {
			return "", nil, err
		}
		return m.GetResourceVersion(), objs, nil
	}
}

// watchSecrets waits for Secrets matching opts for which done holds.
func watchSecrets(ctx context.Context, c kubernetes.Interface, opts metav1.ListOptions, done func(*corev1.Secret) bool) (func(int, time.Duration) (time.Time, int), error) {
	api := c.CoreV1().Secrets("")
	return watchUntil(ctx, lister(api.List), api.Watch, opts, func(o runtime.Object) (string, bool) {
		s, ok := o.(*corev1.Secret)
		return s.Namespace + "/" + s.Name, ok && done(s)
	})
}

// watchDeployments waits for Deployments for which done holds.
func watchDeployments(ctx context.Context, c kubernetes.Interface, done func(*appsv1.Deployment) bool) (func(int, time.Duration) (time.Time, int), error) {
	api := c.AppsV1().Deployments("")
	return watchUntil(ctx, lister(api.List), api.Watch, metav1.ListOptions{}, func(o runtime.Object) (string, bool) {
		d, ok := o.(*appsv1.Deployment)
		return d.Namespace + "/" + d.Name, ok && done(d)
	})
}

// courier is one courier process under measurement.
type courier struct {
	cmd  *exec.Cmd
	addr string
	log  *os.File
	done chan struct{}
}

// limited is courier run under the chart's memory limits, in cg.
type limited struct {
	chartLimits
	cg *memCgroup
}

// startCourier runs courier; with lim, as the chart does (GOMEMLIMIT) in a
// cgroup with the container's memory limit, its log written by the bench so
// the page cache of the log is not charged to courier's limit.
func startCourier(bin, dir, kubeconfig, addr string, args []string, lim *limited) (*courier, error) {
	logf, err := os.OpenFile(filepath.Join(dir, "courier.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	argv := append([]string{bin, "--kubeconfig=" + kubeconfig, "--metrics-addr=" + addr, "--namespace=" + courierNS,
		"--source-namespaces=" + platformNS, "--profiling"}, args...)
	var out io.Writer = logf
	env := os.Environ()
	if lim != nil {
		argv, out = lim.cg.wrap(argv), struct{ io.Writer }{logf}
		env = append(env, "GOMEMLIMIT="+lim.GoMemLimit)
	}
	c := &courier{cmd: exec.Command(argv[0], argv[1:]...), addr: addr, log: logf, done: make(chan struct{})}
	c.cmd.Stdout, c.cmd.Stderr, c.cmd.Env = out, out, env
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// waitReady polls /readyz and courier_leader_is_leader until both say yes.
func (c *courier) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		select {
		case <-c.done:
			return fmt.Errorf("courier exited: %v", c.cmd.ProcessState)
		default:
		}
		if code, _ := c.get("/readyz"); code == http.StatusOK {
			if _, body := c.get("/metrics"); metricValue(body, "courier_leader_is_leader") == 1 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("courier not ready within %s", timeout)
}

func (c *courier) get(path string) (int, string) {
	resp, err := http.Get("http://" + c.addr + path)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		b.WriteString(sc.Text())
		b.WriteByte('\n')
	}
	return resp.StatusCode, b.String()
}

func (c *courier) stop() {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(20 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
	c.log.Close()
}

// profile saves courier's /debug/pprof/<which> (it runs with --profiling) to path.
func (c *courier) profile(which, path string) error {
	resp, err := http.Get("http://" + c.addr + "/debug/pprof/" + which)
	if err != nil {
		return fmt.Errorf("profile %s: %w", which, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("profile %s: %s", which, resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("profile %s: %w", which, err)
	}
	return f.Close()
}

// memory is courier's RSS now and at its peak (VmRSS, VmHWM), the part of
// the RSS that is file-backed (RssFile: the binary's pages, clean, which the
// kernel reclaims under pressure) and its Go heap in use.
type memory struct {
	RSS     int64 `json:"rssBytes"`
	PeakRSS int64 `json:"peakRssBytes"`
	RSSFile int64 `json:"rssFileBytes"`
	Heap    int64 `json:"heapInuseBytes"`
}

func (c *courier) memory() memory {
	var m memory
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", c.cmd.Process.Pid))
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			m.RSS = kb * 1024
		case "VmHWM:":
			m.PeakRSS = kb * 1024
		case "RssFile:":
			m.RSSFile = kb * 1024
		}
	}
	_, body := c.get("/metrics")
	m.Heap = int64(metricValue(body, "go_memstats_heap_inuse_bytes"))
	return m
}

// metricValue sums every series of name in a /metrics text.
func metricValue(text, name string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, name)
		if !ok || (rest != "" && rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}
