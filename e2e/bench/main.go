// Command bench measures courier at scale on the local control plane, against
// a floor measured in the same run: a client with no logic that makes the
// same writes as fast as this API server takes them. `make bench` runs the
// full dataset, `make bench-smoke` a tiny one.
//
// It starts the control plane, loads a dataset (flags), runs courier (built
// without the race detector, with its default client limits; rollout pacing
// lifted so that the patches themselves are measured), and runs each
// scenario -repeats times: restart → ready and writes, one source update →
// every replica and every consuming Deployment, a new namespace → 50
// replicas, 100 sources updated at once, and a quiet period. It prints a
// table and writes the results as JSON.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/courier-k8s/courier/e2e/cluster"
)

type options struct {
	dataset
	repeats    int
	steady     time.Duration
	out        string
	binDir     string
	dir        string
	courierArg string
	workers    int
	atOnce     bool
	profiles   string
	limits     string
	kcm        string
	chart      string
	cross      string
}

// gcCPU is the Go runtime's estimate of the CPU its garbage collector took.
const gcCPU = "go_cpu_classes_gc_total_cpu_seconds_total"

// debounce is courier's --reload-debounce in -courier-args (default 2 s):
// the floor of 3b waits as long between its updates and its patches.
func (o options) debounce() time.Duration {
	d := 2 * time.Second
	for _, a := range strings.Fields(o.courierArg) {
		if v, ok := strings.CutPrefix(a, "--reload-debounce="); ok {
			if p, err := time.ParseDuration(v); err == nil {
				d = p
			}
		}
	}
	return d
}

func main() {
	var o options
	flag.IntVar(&o.Namespaces, "namespaces", 1000, "namespaces")
	flag.IntVar(&o.Secrets, "secrets", 10000, "Secrets spread over the namespaces")
	flag.IntVar(&o.SecretBytes, "secret-bytes", 4096, "size of each Secret and ConfigMap value")
	flag.IntVar(&o.ConfigMaps, "configmaps", 5000, "ConfigMaps spread over the namespaces")
	flag.IntVar(&o.HelmReleases, "helm-releases", 300, "helm.sh/release.v1 Secrets")
	flag.IntVar(&o.HelmBytes, "helm-bytes", 500<<10, "size of each Helm release Secret")
	flag.IntVar(&o.Deployments, "deployments", 2000, "Deployments (0 pods each), each consuming 1–3 Secrets/ConfigMaps")
	flag.IntVar(&o.Consumers, "consumers", 1000, "of those, Deployments consuming the shared source (reload on)")
	flag.IntVar(&o.repeats, "repeats", 10, "repetitions of each scenario")
	flag.DurationVar(&o.steady, "steady", 5*time.Minute, "length of the steady-state scenario")
	flag.StringVar(&o.out, "out", ".run/bench/results.json", "where to write the results as JSON")
	flag.StringVar(&o.binDir, "controlplane-bin", "", "control-plane binaries (e2e/tools/build.sh prints the directory)")
	flag.StringVar(&o.dir, "dir", ".run/bench", "working directory: courier binary, logs, cluster data")
	flag.StringVar(&o.courierArg, "courier-args", "--reload-qps=1000 --reload-burst=1000", "extra courier flags (space-separated); the default lifts rollout pacing, keeping the 2 s debounce")
	flag.IntVar(&o.workers, "floor-workers", 64, "concurrent requests of the floor client")
	flag.BoolVar(&o.atOnce, "floor-at-once", true, "also measure the floor making all N + D writes at once (not a target's baseline; false saves a third of scenario 3)")
	flag.StringVar(&o.profiles, "profiles", "", "if set, write courier's CPU profile of the first source update (scenario 3) and its heap profile at the end of the steady state here")
	flag.StringVar(&o.limits, "controlplane-memory-limits", "", "GOMEMLIMIT per control-plane component, e.g. kube-apiserver=8GiB,kube-controller-manager=3GiB (never courier's)")
	flag.StringVar(&o.chart, "chart-limits", "", "run courier under the memory limits of this chart values file (charts/courier/values.yaml): GOMEMLIMIT=goMemLimit in a memory cgroup of resources.limits.memory, as a pod; needs root and a writable cgroup hierarchy")
	flag.StringVar(&o.kcm, "controllers", "", "kube-controller-manager's --controllers (empty: every default one)")
	flag.StringVar(&o.cross, "clusters", "3x100", "scenario 7: KxM, one source into M namespaces of each of K other clusters (each a control plane of its own); empty: none")
	startFloorOf := flag.String("start-floor", "", "instead of running: measure scenario 1's floor (a bare client filling courier's caches) -repeats times on the cluster of this kubeconfig")
	verdictsOf := flag.String("verdicts", "", "instead of running: judge each target over the results of these runs (comma-separated JSON files)")
	rejudge := flag.String("rejudge", "", "instead of running: judge the repetitions in these results (comma-separated JSON files) again by the current rule, in place; the measured values stay as they are")
	flag.Parse()
	if *rejudge != "" {
		for _, f := range strings.Split(*rejudge, ",") {
			if err := rejudgeFile(f); err != nil {
				fmt.Fprintf(os.Stderr, "bench: %v\n", err)
				os.Exit(1)
			}
		}
		return
	}
	if *verdictsOf != "" {
		if err := verdicts(os.Stdout, strings.Split(*verdictsOf, ",")); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if *startFloorOf != "" {
		if err := measureStartFloor(ctx, *startFloorOf, o.repeats); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, o); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// harnessClient is the bench's own client: no client-side limit, so it is
// never the bottleneck, and courier's encoding (protobuf), so the floor is the
// best a client can do.
func harnessClient(c *rest.Config) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(c)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return kubernetes.NewForConfig(cfg)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// results is what the run found; the JSON written to -out.
type results struct {
	Date string `json:"date"`
	// Commit: courier's commit (git describe; built from the working
	// directory), what a verdict is about.
	Commit string `json:"commit"`
	// MinValid: the valid repetitions a scenario needs for its median to
	// count towards a verdict (the bench's rule, for whoever reads this).
	MinValid   int              `json:"minValidRepetitions"`
	Machine    string           `json:"machine"`
	Dataset    dataset          `json:"dataset"`
	RawMiB     float64          `json:"rawSecretAndConfigMapMiB"`
	CourierArg string           `json:"courierArgs"`
	LoadSecs   float64          `json:"loadSeconds"`
	Scenarios  []scenario       `json:"scenarios"`
	Memory     map[string]int64 `json:"memory"`
	// CPU: courier's CPU seconds and its garbage collector's share of them,
	// over the steady state and over the last process's life.
	CPU map[string]float64 `json:"cpuSeconds"`
	// Limits: the chart's limits courier ran under (-chart-limits), and
	// what the kernel saw of them.
	Limits   *limitsResult `json:"chartLimits,omitempty"`
	Problems []string      `json:"problems"`
}

type limitsResult struct {
	chartLimits
	OOMKills        int   `json:"oomKills"`
	CgroupPeakBytes int64 `json:"cgroupPeakBytes"`
}

type scenario struct {
	Name  string `json:"name"`
	Stats stats  `json:"seconds"`
	// Floor: the same N + D writes by a no-logic client, all at once (as
	// courier's go); FloorAlone: each set of writes by itself.
	Floor      *stats `json:"floorSeconds,omitempty"`
	FloorAlone *stats `json:"floorAloneSeconds,omitempty"`
	// Paired ratios: courier's span ÷ the floor alone's in the same
	// repetition, one per valid repetition, in order.
	PairedAlone []float64 `json:"pairedRatiosToFloorAlone,omitempty"`
	// Repetitions: every repetition timed against floors, valid or not;
	// Stats, FloorAlone and PairedAlone hold the valid ones.
	Repetitions []repetition `json:"repetitions,omitempty"`
	// PairedAtOnce: every repetition's span ÷ the floor at once measured
	// after it (shown, not a target's baseline).
	PairedAtOnce []float64 `json:"pairedRatiosToFloorAtOnce,omitempty"`
	Writes       string    `json:"writes"` // measured, per repetition
	Want         string    `json:"wantWrites"`
}

// timedAgainstFloor is a scenario of repetitions bracketed by floors:
// judged, and summarised over the valid ones.
func timedAgainstFloor(name string, reps []repetition) scenario {
	reps = judgeRepetitions(reps)
	spans, floors, ratios := valid(reps)
	f := summarize(floors)
	return scenario{Name: name, Stats: summarize(spans), FloorAlone: &f, PairedAlone: ratios, Repetitions: reps}
}

func (r *results) problem(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	logf("PROBLEM: %s", msg)
	r.Problems = append(r.Problems, msg)
}

func run(ctx context.Context, o options) error {
	if o.binDir == "" {
		return fmt.Errorf("-controlplane-bin is empty; build the control plane with `make controlplane`")
	}
	cs, err := parseCross(o.cross)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(o.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	bin, err := filepath.Abs(filepath.Join(o.dir, "courier"))
	if err != nil {
		return err
	}
	logf("building courier (no race detector)")
	if out, err := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, ".").CombinedOutput(); err != nil {
		return fmt.Errorf("build courier: %v\n%s", err, out)
	}
	clusterDir, _ := filepath.Abs(filepath.Join(o.dir, "cluster"))
	limits := map[string]string{}
	for _, kv := range strings.Split(o.limits, ",") {
		if name, limit, ok := strings.Cut(kv, "="); ok {
			limits[name] = limit
		} else if kv != "" {
			return fmt.Errorf("-controlplane-memory-limits: %q is not component=limit", kv)
		}
	}
	c, err := cluster.Start(ctx, cluster.Options{BinDir: o.binDir, Dir: clusterDir, Logf: logf, MemoryLimits: limits, Controllers: o.kcm})
	if err != nil {
		return err
	}
	defer c.Stop()

	client, err := harnessClient(c.Config)
	if err != nil {
		return err
	}
	commit, _ := exec.Command("git", "describe", "--always", "--dirty").Output()
	r := &results{Date: time.Now().UTC().Format(time.RFC3339), Commit: strings.TrimSpace(string(commit)), MinValid: minValid, Machine: machine(), Dataset: o.dataset,
		RawMiB: float64(o.rawBytes()) / (1 << 20), CourierArg: o.courierArg, Memory: map[string]int64{}, CPU: map[string]float64{}}
	var lim *limited
	if o.chart != "" {
		l, err := readChartLimits(o.chart)
		if err != nil {
			return err
		}
		cg, err := newMemCgroup(fmt.Sprintf("courier-bench-%d", os.Getpid()), l.LimitBytes)
		if err != nil {
			return err
		}
		defer cg.remove() // after courier's deferred stop below
		lim = &limited{l, cg}
		r.Limits = &limitsResult{chartLimits: l}
		defer func() { // a run that failed: say whether the kernel killed courier
			if n := cg.oomKills(); n > 0 {
				logf("the kernel OOM-killed courier %d times under the chart's %d MiB limit", n, l.LimitBytes>>20)
			}
		}()
	}

	start := time.Now()
	if err := load(ctx, client, o.dataset, logf); err != nil {
		return fmt.Errorf("load the dataset: %w", err)
	}
	r.LoadSecs = time.Since(start).Seconds()
	logf("dataset loaded in %.0fs (%.0f MiB of Secret and ConfigMap values)", r.LoadSecs, r.RawMiB)

	port, err := cluster.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	args := strings.Fields(o.courierArg)
	cur, err := startCourier(bin, o.dir, c.Kubeconfig, addr, args, lim)
	if err != nil {
		return err
	}
	// peakRSS is the highest VmHWM of every courier process the run started.
	var peakRSS int64
	stopCourier := func() {
		peakRSS = max(peakRSS, cur.memory().PeakRSS)
		cur.stop()
	}
	startAndWait := func() error {
		var err error
		if cur, err = startCourier(bin, o.dir, c.Kubeconfig, addr, args, lim); err != nil {
			return err
		}
		return cur.waitReady(5 * time.Minute)
	}
	defer func() { cur.stop() }()
	if err := cur.waitReady(5 * time.Minute); err != nil {
		return err
	}
	logf("courier's first start: waiting for every replica and baseline")
	replicas := o.Namespaces + o.Namespaces + o.Namespaces // shared + group + burst, one each per namespace
	if err := waitCount(ctx, 2*o.patience(), func() (int, error) {
		l, err := client.CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: "courier.dev/replica=true"})
		if err != nil {
			return 0, err
		}
		return len(l.Items), nil
	}, replicas); err != nil {
		return fmt.Errorf("initial replication: %w", err)
	}
	if err := settle(ctx, client, 5*time.Second, o.patience()); err != nil {
		return err
	}
	r.Memory["firstStartPeakRssBytes"] = cur.memory().PeakRSS

	// 1 and 2: restarts, everything in sync. Each start is bracketed by the
	// floor (a bare client filling the same caches, courier idle) right
	// before and right after it, judged by the same rule as scenario 3, and
	// rerun like it until -repeats repetitions are valid.
	var startReps []repetition
	var restartWrites []float64
	prevFloor, err := startFloor(ctx, client)
	if err != nil {
		return err
	}
	for i := 0; i < 2*o.repeats; i++ {
		if _, _, ratios := valid(judgeRepetitions(startReps)); len(ratios) >= o.repeats {
			break
		}
		stopCourier()
		before, err := apiserverWrites(ctx, client)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if err := startAndWait(); err != nil {
			return err
		}
		ready := time.Since(t0).Seconds()
		time.Sleep(2 * time.Second) // anything courier would write, it writes now
		after, err := apiserverWrites(ctx, client)
		if err != nil {
			return err
		}
		d := after.minus(before)
		n := d.ofCourier()
		restartWrites = append(restartWrites, n)
		if n != 0 {
			r.problem("restart %d wrote %v", i+1, d)
		}
		f, err := startFloor(ctx, client) // courier is idle: all in sync
		if err != nil {
			return err
		}
		startReps = append(startReps, repetition{Seconds: ready, FloorBefore: prevFloor, FloorAfter: f})
		prevFloor = f
		logf("restart %d: ready in %.2fs, %g writes; the same caches filled by a bare client in %.2fs", i+1, ready, n, f)
	}
	s1 := timedAgainstFloor("1. start → ready (caches synced, leader), all in sync", startReps)
	s1.Writes, s1.Want = "-", "-"
	r.Scenarios = append(r.Scenarios, s1,
		scenario{Name: "2. restart, all in sync: API writes", Stats: summarize(restartWrites), Writes: fmt.Sprint(restartWrites), Want: "0"})
	m := cur.memory()
	r.Memory["restartPeakRssBytes"], r.Memory["afterRestartRssBytes"], r.Memory["afterRestartHeapBytes"] = m.PeakRSS, m.RSS, m.Heap

	// 3: one source update → every replica, every consumer. Each courier
	// span is bracketed by floors alone measured right before and right
	// after it, so each repetition gives a paired ratio to the mean of its
	// two floors, and a repetition whose floors drifted (judgeRepetitions)
	// is run again, up to -repeats more times. courier is stopped while floors run: it would
	// otherwise receive (and the API server encode for it) a watch event for
	// each floor write, slowing the floor. Every span starts on a quiet API
	// server (the Deployment controller done with the previous round's
	// ReplicaSets).
	var replicaReps, rolloutReps []repetition
	var floorReplicas, floorPatches []float64
	var updateWrites, updateEvents []string
	floorAlone := func(round int) (float64, float64, error) {
		if err := settle(ctx, client, 2*time.Second, o.patience()); err != nil {
			return 0, 0, err
		}
		fr, fp, err := floor(ctx, client, o, fmt.Sprintf("f%d-alone-%s", round, randomText(8)), true)
		if err == nil {
			logf("         floor alone: replicas %.2fs, consumers through the %s debounce %.2fs", fr, o.debounce(), fp)
		}
		return fr, fp, err
	}
	stopCourier()
	prevR, prevP, err := floorAlone(0)
	if err != nil {
		return err
	}
	if err := startAndWait(); err != nil {
		return err
	}
	enough := func() bool {
		a, _, _ := valid(judgeRepetitions(replicaReps))
		b, _, _ := valid(judgeRepetitions(rolloutReps))
		return len(a) >= o.repeats && len(b) >= o.repeats
	}
	for i := 0; !enough() && i < 2*o.repeats; i++ {
		if err := settle(ctx, client, 2*time.Second, o.patience()); err != nil {
			return err
		}
		var profiled chan error
		if i == 0 && o.profiles != "" {
			profiled = make(chan error, 1)
			go func() {
				profiled <- cur.profile("profile?seconds=30", filepath.Join(o.profiles, "cpu-source-update.pprof"))
			}()
			time.Sleep(100 * time.Millisecond) // the profile has started
		}
		updated := time.Now()
		rs, ds, w, err := sourceUpdate(ctx, client, o, fmt.Sprintf("v%d-%s", i, randomText(8)))
		if err != nil {
			return err
		}
		events, err := reloadedEvents(ctx, client, updated, o.Consumers, o.patience())
		if err != nil {
			return err
		}
		updateEvents = append(updateEvents, fmt.Sprint(events))
		if events != o.Consumers {
			r.problem("source update %d: %d consumers got a Reloaded Event, want all %d", i+1, events, o.Consumers)
		}
		if profiled != nil {
			if err := <-profiled; err != nil {
				return err
			}
		}
		got := w.ofCourier() - 1 // less the bench's own source update
		updateWrites = append(updateWrites, fmt.Sprint(got))
		if want := float64(o.Namespaces + o.Consumers); got != want {
			r.problem("source update %d: %g writes (%v), want N + D = %g", i+1, got, w, want)
		}
		logf("update %d: replicas %.2fs, consumers %.2fs, Reloaded Events %d", i+1, rs, ds, events)
		stopCourier()
		fr, fp, err := floorAlone(i + 1)
		if err != nil {
			return err
		}
		replicaReps = append(replicaReps, repetition{Seconds: rs, FloorBefore: prevR, FloorAfter: fr})
		rolloutReps = append(rolloutReps, repetition{Seconds: ds, FloorBefore: prevP, FloorAfter: fp})
		prevR, prevP = fr, fp
		if o.atOnce {
			if err := settle(ctx, client, 2*time.Second, o.patience()); err != nil {
				return err
			}
			fr, fp, err := floor(ctx, client, o, fmt.Sprintf("f%d-at-once-%s", i, randomText(8)), false)
			if err != nil {
				return err
			}
			floorReplicas, floorPatches = append(floorReplicas, fr), append(floorPatches, fp)
			logf("         floor at once: replicas %.2fs (%.2f×), consumers %.2fs (%.2f×)", fr, rs/fr, fp, ds/fp)
		}
		if err := startAndWait(); err != nil {
			return err
		}
	}
	s3a := timedAgainstFloor(fmt.Sprintf("3a. one source update (its one key set to a new 11 B value) → all %d replicas", o.Namespaces), replicaReps)
	s3a.Writes, s3a.Want = strings.Join(updateWrites, " "), fmt.Sprintf("N + D = %d", o.Namespaces+o.Consumers)
	s3b := timedAgainstFloor(fmt.Sprintf("3b. one source update → all %d consumers patched (the floor through the same %s debounce)", o.Consumers, o.debounce()), rolloutReps)
	s3b.Writes, s3b.Want = "Reloaded Events: "+strings.Join(updateEvents, " "), fmt.Sprintf("one per consumer: %d", o.Consumers)
	for _, s := range []scenario{s3a, s3b} {
		if s.Stats.N < o.repeats {
			logf("%s: only %d valid repetitions of %d", s.Name, s.Stats.N, len(s.Repetitions))
		}
	}
	if o.atOnce {
		fRep, fPat := summarize(floorReplicas), summarize(floorPatches)
		s3a.Floor, s3b.Floor = &fRep, &fPat
		spans := func(reps []repetition) (out []float64) {
			for _, r := range reps {
				out = append(out, r.Seconds)
			}
			return out
		}
		s3a.PairedAtOnce, s3b.PairedAtOnce = divide(spans(replicaReps), floorReplicas), divide(spans(rolloutReps), floorPatches)
	}
	r.Scenarios = append(r.Scenarios, s3a, s3b)

	// 4: a new namespace matching 50 sources, on a quiet API server.
	if err := settle(ctx, client, 2*time.Second, o.patience()); err != nil {
		return err
	}
	var fresh []float64
	for i := range o.repeats {
		s, err := freshNamespace(ctx, client, fmt.Sprintf("bench-fresh-%d", i))
		if err != nil {
			return err
		}
		fresh = append(fresh, s)
		logf("new namespace %d: %d replicas in %.3fs", i+1, freshCount, s)
	}
	r.Scenarios = append(r.Scenarios, scenario{Name: fmt.Sprintf("4. new namespace → %d replicas", freshCount), Stats: summarize(fresh), Writes: "-", Want: "-"})

	// 5: 100 sources updated at once, each time on a quiet API server: the
	// namespace controller is done emptying scenario 4's namespaces (its
	// deletes of their replicas would count as writes).
	if err := waitCount(ctx, o.patience(), func() (int, error) {
		n := 0
		for i := range o.repeats {
			_, err := client.CoreV1().Namespaces().Get(ctx, fmt.Sprintf("bench-fresh-%d", i), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				n++
			} else if err != nil {
				return 0, err
			}
		}
		return n, nil
	}, o.repeats); err != nil {
		return fmt.Errorf("scenario 4's namespaces never went: %w", err)
	}
	var burst []float64
	var burstWrites []string
	want := o.Namespaces // every namespace carries one burst label
	for i := range o.repeats {
		if err := settle(ctx, client, 2*time.Second, o.patience()); err != nil {
			return err
		}
		s, w, err := burstUpdate(ctx, client, o, want, fmt.Sprintf("b%d-%s", i, randomText(8)))
		if err != nil {
			return err
		}
		burst = append(burst, s)
		got := w.ofCourier() - burstCount // less the bench's own source updates
		burstWrites = append(burstWrites, fmt.Sprint(got))
		if got != float64(want) {
			r.problem("burst %d: %g replica writes (%v), want %d", i+1, got, w, want)
		}
		logf("burst %d: %d replicas of %d sources in %.2fs", i+1, want, burstCount, s)
	}
	r.Scenarios = append(r.Scenarios, scenario{Name: fmt.Sprintf("5. %d sources updated at once → all %d replicas", burstCount, want),
		Stats: summarize(burst), Writes: strings.Join(burstWrites, " "), Want: strconv.Itoa(want)})

	// 6: steady state.
	logf("steady state for %s", o.steady)
	if err := settle(ctx, client, 5*time.Second, o.patience()); err != nil {
		return err
	}
	_, body := cur.get("/metrics")
	reqBefore := metricValue(body, "courier_kube_client_requests_total")
	cpuBefore, gcBefore := metricValue(body, "process_cpu_seconds_total"), metricValue(body, gcCPU)
	wBefore, err := apiserverWrites(ctx, client)
	if err != nil {
		return err
	}
	select {
	case <-time.After(o.steady):
	case <-ctx.Done():
		return ctx.Err()
	}
	_, body = cur.get("/metrics")
	wAfter, err := apiserverWrites(ctx, client)
	if err != nil {
		return err
	}
	requests := metricValue(body, "courier_kube_client_requests_total") - reqBefore
	r.CPU["steady"], r.CPU["steadyGc"] = metricValue(body, "process_cpu_seconds_total")-cpuBefore, metricValue(body, gcCPU)-gcBefore
	steadyWrites := wAfter.minus(wBefore).ofCourier()
	if steadyWrites != 0 {
		r.problem("steady state: %g writes", steadyWrites)
	}
	r.Scenarios = append(r.Scenarios, scenario{Name: fmt.Sprintf("6. idle for %s: courier's API requests (its Lease renewals; writes counted apart)", o.steady),
		Stats: stats{N: 1, Median: requests, P99: requests}, Writes: fmt.Sprint(steadyWrites), Want: "0"})
	if o.profiles != "" {
		if err := cur.profile("heap?gc=1", filepath.Join(o.profiles, "heap-steady.pprof")); err != nil {
			return err
		}
	}
	m = cur.memory()
	r.Memory["steadyRssBytes"], r.Memory["steadyHeapBytes"], r.Memory["peakRssBytes"] = m.RSS, m.Heap, max(peakRSS, m.PeakRSS)
	r.Memory["steadyRssFileBytes"] = m.RSSFile
	cur.get("/debug/pprof/heap?gc=1") // a forced GC: what is left is live
	_, body = cur.get("/metrics")
	r.Memory["steadyLiveHeapBytes"] = int64(metricValue(body, "go_memstats_heap_alloc_bytes"))
	r.CPU["lastProcess"], r.CPU["lastProcessGc"] = metricValue(body, "process_cpu_seconds_total"), metricValue(body, gcCPU)
	if lim != nil {
		r.Limits.OOMKills, r.Limits.CgroupPeakBytes = lim.cg.oomKills(), lim.cg.peak()
		if r.Limits.OOMKills > 0 {
			r.problem("the kernel OOM-killed courier %d times under the chart's %d MiB limit", r.Limits.OOMKills, lim.LimitBytes>>20)
		}
	}

	// 7: other clusters, after the memory of the steady state is read.
	if cs.Clusters > 0 && cs.Namespaces > 0 {
		s7, err := crossClusters(ctx, o, cs, client)
		if err != nil {
			return fmt.Errorf("scenario 7: %w", err)
		}
		r.Scenarios = append(r.Scenarios, s7)
	}

	report(os.Stdout, r)
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	if err := os.WriteFile(o.out, append(b, '\n'), 0o644); err != nil {
		return err
	}
	logf("results written to %s", o.out)
	if len(r.Problems) > 0 {
		return fmt.Errorf("%d problems: %s", len(r.Problems), strings.Join(r.Problems, "; "))
	}
	return nil
}

// sourceUpdate changes the shared source to value and returns how long until
// the last replica and the last consumer showed it, and the API writes it cost.
func sourceUpdate(ctx context.Context, c kubernetes.Interface, o options, value string) (float64, float64, writes, error) {
	hashes := map[string]string{}
	var deps *appsv1.DeploymentList
	if err := retrying(ctx, func() (err error) {
		deps, err = c.AppsV1().Deployments("").List(ctx, metav1.ListOptions{})
		return err
	}); err != nil {
		return 0, 0, nil, err
	}
	for _, d := range deps.Items {
		hashes[d.Namespace+"/"+d.Name] = d.Spec.Template.Annotations["courier.dev/config-hash"]
	}
	waitReplicas, err := watchSecrets(ctx, c, metav1.ListOptions{LabelSelector: "courier.dev/replica=true", FieldSelector: "metadata.name=" + sharedName},
		func(s *corev1.Secret) bool { return string(s.Data[sharedKey]) == value })
	if err != nil {
		return 0, 0, nil, err
	}
	waitRollouts, err := watchDeployments(ctx, c, func(d *appsv1.Deployment) bool {
		h := d.Spec.Template.Annotations["courier.dev/config-hash"]
		return h != "" && h != hashes[d.Namespace+"/"+d.Name]
	})
	if err != nil {
		return 0, 0, nil, err
	}
	before, err := apiserverWrites(ctx, c)
	if err != nil {
		return 0, 0, nil, err
	}
	var src *corev1.Secret
	if err := retrying(ctx, func() (err error) {
		src, err = c.CoreV1().Secrets(platformNS).Get(ctx, sharedName, metav1.GetOptions{})
		return err
	}); err != nil {
		return 0, 0, nil, err
	}
	t0 := time.Now()
	if err := setValue(ctx, c, platformNS, sharedName, value, src); err != nil {
		return 0, 0, nil, err
	}
	lastReplica, n := waitReplicas(o.Namespaces, o.patience())
	if n != o.Namespaces {
		return 0, 0, nil, fmt.Errorf("only %d of %d replicas updated", n, o.Namespaces)
	}
	lastRollout, n := waitRollouts(o.Consumers, o.patience())
	if n != o.Consumers {
		return 0, 0, nil, fmt.Errorf("only %d of %d consumers rolled out", n, o.Consumers)
	}
	time.Sleep(2 * time.Second) // count any late write too
	after, err := apiserverWrites(ctx, c)
	if err != nil {
		return 0, 0, nil, err
	}
	return lastReplica.Sub(t0).Seconds(), lastRollout.Sub(t0).Seconds(), after.minus(before), nil
}

// reloadedEvents waits (up to timeout) until want workloads have a Reloaded
// Event seen at or after since, and returns how many have.
func reloadedEvents(ctx context.Context, c kubernetes.Interface, since time.Time, want int, timeout time.Duration) (int, error) {
	since = since.Truncate(time.Second) // Events' timestamps are in seconds
	deadline := time.Now().Add(timeout)
	for {
		var list *corev1.EventList
		if err := retrying(ctx, func() (err error) {
			list, err = c.CoreV1().Events("").List(ctx, metav1.ListOptions{FieldSelector: "reason=Reloaded"})
			return err
		}); err != nil {
			return 0, err
		}
		seen := map[types.UID]bool{}
		for _, e := range list.Items {
			if !e.LastTimestamp.Time.Before(since) {
				seen[e.InvolvedObject.UID] = true
			}
		}
		if len(seen) >= want || time.Now().After(deadline) {
			return len(seen), nil
		}
		time.Sleep(2 * time.Second)
	}
}

// floor makes the same writes as one source update with no logic: an update
// of a Secret in every namespace and a pod-template patch of every consumer,
// each set as fast as floor-workers concurrent requests go, observed by watch
// as courier's are. Alone, the patches start one --reload-debounce after
// the updates are all seen, and both spans are timed from the first update,
// as courier's are from the source's; else both sets go at once (courier's
// rollouts start while replicas are still being written) and each set is
// timed from the start. It returns each set's makespan.
func floor(ctx context.Context, c kubernetes.Interface, o options, value string, alone bool) (float64, float64, error) {
	waitSecrets, err := watchSecrets(ctx, c, metav1.ListOptions{FieldSelector: "metadata.name=" + floorName},
		func(s *corev1.Secret) bool { return string(s.Data[sharedKey]) == value })
	if err != nil {
		return 0, 0, err
	}
	waitPatches, err := watchDeployments(ctx, c, func(d *appsv1.Deployment) bool { return d.Spec.Template.Annotations[floorAnnot] == value })
	if err != nil {
		return 0, 0, err
	}
	secrets := make([]*corev1.Secret, o.Namespaces)
	if err := parallel(o.Namespaces, o.workers, func(i int) error {
		return retrying(ctx, func() (err error) {
			secrets[i], err = c.CoreV1().Secrets(nsName(i)).Get(ctx, floorName, metav1.GetOptions{})
			return err
		})
	}); err != nil {
		return 0, 0, err
	}
	consumers := consumerNames(o)
	patch := []byte(fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, floorAnnot, value))
	update := func() error {
		return parallel(o.Namespaces, o.workers, func(i int) error {
			return setValue(ctx, c, secrets[i].Namespace, floorName, value, secrets[i])
		})
	}
	patchAll := func() error {
		return parallel(len(consumers), o.workers, func(i int) error {
			return retrying(ctx, func() error { // a merge patch: the same again if it was made
				_, err := c.AppsV1().Deployments(consumers[i].Namespace).Patch(ctx, consumers[i].Name, types.MergePatchType, patch, metav1.PatchOptions{})
				return err
			})
		})
	}
	waitBoth := func(t0, p0 time.Time) (float64, float64, error) {
		lastS, n := waitSecrets(o.Namespaces, o.patience())
		if n != o.Namespaces {
			return 0, 0, fmt.Errorf("floor: %d of %d updates seen", n, o.Namespaces)
		}
		lastP, n := waitPatches(len(consumers), o.patience())
		if n != len(consumers) {
			return 0, 0, fmt.Errorf("floor: %d of %d patches seen", n, len(consumers))
		}
		return lastS.Sub(t0).Seconds(), lastP.Sub(p0).Seconds(), nil
	}

	t0 := time.Now()
	if alone {
		if err := update(); err != nil {
			return 0, 0, err
		}
		if _, n := waitSecrets(o.Namespaces, o.patience()); n != o.Namespaces {
			return 0, 0, fmt.Errorf("floor: %d of %d updates seen", n, o.Namespaces)
		}
		time.Sleep(o.debounce()) // as courier waits before its rollouts
		if err := patchAll(); err != nil {
			return 0, 0, err
		}
		return waitBoth(t0, t0) // the updates are all seen: their span is final
	}
	errc := make(chan error, 1)
	go func() { errc <- patchAll() }()
	if err := update(); err != nil {
		return 0, 0, err
	}
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	return waitBoth(t0, t0)
}

// setValue updates Secret ns/name (as read: s, when given) so its shared key
// holds value. An update the overloaded API server did not answer may have
// been made: the retry reads the Secret again and is done if it was.
func setValue(ctx context.Context, c kubernetes.Interface, ns, name, value string, s *corev1.Secret) error {
	return retrying(ctx, func() error {
		if s == nil {
			var err error
			if s, err = c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err != nil {
				return err
			}
			if string(s.Data[sharedKey]) == value {
				return nil
			}
		}
		s.Data[sharedKey] = []byte(value)
		_, err := c.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		s = nil // read again before another try
		return err
	})
}

// consumerNames lists the Deployments load made consumers of the shared source.
func consumerNames(o options) []types.NamespacedName {
	perNS := max(1, o.Deployments/o.Namespaces)
	var out []types.NamespacedName
	for i := range o.Consumers {
		out = append(out, types.NamespacedName{Namespace: nsName(i / perNS % o.Namespaces), Name: fmt.Sprintf("app-%d", i%perNS)})
	}
	return out
}

// freshNamespace creates a namespace matching the 50 fresh sources and
// returns how long until all 50 replicas were there; it deletes it after.
func freshNamespace(ctx context.Context, c kubernetes.Interface, name string) (float64, error) {
	wait, err := watchSecrets(ctx, c, metav1.ListOptions{LabelSelector: "courier.dev/replica=true"},
		func(s *corev1.Secret) bool { return s.Namespace == name })
	if err != nil {
		return 0, err
	}
	t0 := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labelFresh: "yes"}}}
	if _, err := c.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	last, n := wait(freshCount, time.Minute)
	if n != freshCount {
		return 0, fmt.Errorf("new namespace %s: %d of %d replicas", name, n, freshCount)
	}
	if err := c.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return 0, err
	}
	return last.Sub(t0).Seconds(), nil
}

// burstUpdate updates the 100 burst sources at once and returns how long
// until all want replicas showed the new value, and the writes it cost.
func burstUpdate(ctx context.Context, c kubernetes.Interface, o options, want int, value string) (float64, writes, error) {
	wait, err := watchSecrets(ctx, c, metav1.ListOptions{LabelSelector: "courier.dev/replica=true"},
		func(s *corev1.Secret) bool {
			return strings.HasPrefix(s.Name, "burst-") && string(s.Data[sharedKey]) == value
		})
	if err != nil {
		return 0, nil, err
	}
	sources := make([]*corev1.Secret, burstCount)
	if err := parallel(burstCount, o.workers, func(i int) error {
		s, err := c.CoreV1().Secrets(platformNS).Get(ctx, fmt.Sprintf("burst-%d", i), metav1.GetOptions{})
		sources[i] = s
		return err
	}); err != nil {
		return 0, nil, err
	}
	before, err := apiserverWrites(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	t0 := time.Now()
	if err := parallel(burstCount, o.workers, func(i int) error {
		sources[i].Data[sharedKey] = []byte(value)
		_, err := c.CoreV1().Secrets(platformNS).Update(ctx, sources[i], metav1.UpdateOptions{})
		return err
	}); err != nil {
		return 0, nil, err
	}
	last, n := wait(want, o.patience())
	if n != want {
		return 0, nil, fmt.Errorf("burst: %d of %d replicas updated", n, want)
	}
	time.Sleep(time.Second) // count any late write too
	after, err := apiserverWrites(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	return last.Sub(t0).Seconds(), after.minus(before), nil
}

// settle waits until the API server has taken no write to the dataset's
// kinds for quiet (the Deployment controller finishing rollouts, namespaces
// being deleted); leases and node heartbeats go on regardless.
func settle(ctx context.Context, c kubernetes.Interface, quiet, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	prev, err := apiserverWrites(ctx, c)
	if err != nil {
		return err
	}
	for time.Now().Before(deadline) {
		time.Sleep(quiet)
		now, err := apiserverWrites(ctx, c)
		if err != nil {
			return err
		}
		if now.minus(prev).ofData() == 0 {
			return nil
		}
		prev = now
	}
	return fmt.Errorf("the API server never went quiet for %s", quiet)
}

func waitCount(ctx context.Context, timeout time.Duration, count func() (int, error), want int) error {
	deadline := time.Now().Add(timeout)
	n := 0
	for time.Now().Before(deadline) {
		var err error
		if n, err = count(); err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("%d of %d within %s", n, want, timeout)
}

// spread is a sample's median and range, in unit.
func spread(xs []float64, unit string) string {
	if len(xs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.3g%s [%.3g–%.3g]", summarize(xs).Median, unit, slices.Min(xs), slices.Max(xs))
}

func machine() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	model, cpus := "", 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "model name") && model == "" {
			model = strings.TrimSpace(strings.SplitN(line, ":", 2)[1])
		}
		if strings.HasPrefix(line, "processor") {
			cpus++
		}
	}
	return fmt.Sprintf("%d × %s", cpus, model)
}

func report(w *os.File, r *results) {
	fmt.Fprintf(w, "\ncourier bench — %s — %s\n", r.Date, r.Machine)
	fmt.Fprintf(w, "dataset: %d namespaces, %d Secrets and %d ConfigMaps of %d B, %d Helm releases of %d KiB (%.0f MiB of values), %d Deployments (%d consumers); courier %s\n\n",
		r.Dataset.Namespaces, r.Dataset.Secrets, r.Dataset.ConfigMaps, r.Dataset.SecretBytes, r.Dataset.HelmReleases, r.Dataset.HelmBytes>>10,
		r.RawMiB, r.Dataset.Deployments, r.Dataset.Consumers, r.CourierArg)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tN\tMEDIAN\tP99 (MAX IF N<100)\tFLOOR ALONE\tPAIRED RATIO: MEDIAN [MIN–MAX]\tFLOOR N+D AT ONCE\tPAIRED RATIO\tWRITES\tWANT")
	for _, s := range r.Scenarios {
		alone, aloneRatio, floor, ratio := "-", "-", "-", "-"
		if s.FloorAlone != nil {
			alone, aloneRatio = s.FloorAlone.median(), spread(s.PairedAlone, "×")
		}
		if s.Floor != nil {
			floor, ratio = s.Floor.median(), spread(s.PairedAtOnce, "×")
		}
		med, p99 := s.Stats.median(), "-"
		if s.Stats.N > 0 {
			p99 = fmt.Sprintf("%.3f", s.Stats.P99)
		} else {
			med = "no valid repetition"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Stats.N, med, p99, alone, aloneRatio, floor, ratio, s.Writes, s.Want)
	}
	tw.Flush()
	mib := func(b int64) string { return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20)) }
	fmt.Fprintf(w, "\nmemory: steady RSS %s (file-backed %s; Go heap %s, live after a forced GC %s), peak RSS %s; first start peak %s; raw values %.0f MiB\n",
		mib(r.Memory["steadyRssBytes"]), mib(r.Memory["steadyRssFileBytes"]), mib(r.Memory["steadyHeapBytes"]), mib(r.Memory["steadyLiveHeapBytes"]), mib(r.Memory["peakRssBytes"]),
		mib(r.Memory["firstStartPeakRssBytes"]), r.RawMiB)
	share := func(gc, all float64) string { return fmt.Sprintf("%.1fs, %.0f%% of it GC", all, 100*gc/all) }
	fmt.Fprintf(w, "CPU: steady state %s; the last process's life %s\n",
		share(r.CPU["steadyGc"], r.CPU["steady"]), share(r.CPU["lastProcessGc"], r.CPU["lastProcess"]))
	if l := r.Limits; l != nil {
		fmt.Fprintf(w, "under the chart's limits: GOMEMLIMIT=%s in a %s cgroup: %d OOM kills, cgroup peak %s\n",
			l.GoMemLimit, mib(l.LimitBytes), l.OOMKills, mib(l.CgroupPeakBytes))
	}
	if len(r.Problems) > 0 {
		fmt.Fprintf(w, "problems: %s\n", strings.Join(r.Problems, "; "))
	}
}
