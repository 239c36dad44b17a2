// Command suite is `make e2e`: it runs the end-to-end suite as several test
// processes at once, each with a control plane of its own, so the suite takes
// the time of its slowest share instead of the sum of its tests. Most of an
// e2e test's time is waiting (debounces, quiet windows, leases, rollouts on
// kwok), not CPU, so on 2 cores four shares run in about a quarter of the time.
//
// Within one process the tests run one at a time, in source order, as `go test
// -p 1` runs them; nothing a test assumes about its cluster changes. The tests
// are spread over the processes by the times they took in the last recorded run
// (e2e/testdata/durations.json; longest first, each to the least loaded share),
// and the part of the suite `make test` runs on the oldest supported Kubernetes
// (-compat) is one more process on that control plane.
//
// The tools some tests need (Argo Rollouts and ESO, cosign, the Kyverno CLI,
// the 1.30 control plane) are built in the background while the tests run.
// The tests known to need one (toolTests) run in a second process of their
// share, started once the tools they need are built, so on a fresh machine
// no share stands waiting for a build; any other test that needs one waits
// for its build (the build scripts take a lock, so nothing is built twice).
//
// At the end it prints every failed test's output, the ten slowest tests and
// the totals, and writes each process's `go test -json` stream and the
// measured durations to -out. -record writes the durations to
// e2e/testdata/durations.json for the next runs to balance on.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

const pkg = "github.com/courier-k8s/courier/e2e"

func main() {
	shards := flag.Int("shards", 4, "test processes for the main suite, each with its own control plane")
	run := flag.String("run", "", "run only the tests whose names match this regular expression")
	compat := flag.String("compat", "", "also run the tests matching this regular expression on the oldest supported Kubernetes (e2e/tools/build-compat.sh), in one more process")
	compatMinor := flag.String("compat-minor", "30", "the Kubernetes minor -compat's control plane must report")
	timeout := flag.Duration("timeout", 40*time.Minute, "each process's go test -timeout")
	out := flag.String("out", ".run/e2e", "where the JSON streams and measured durations go")
	record := flag.Bool("record", false, "write the measured durations to "+durationsFile+" (from a full, passing run)")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := &suite{out: *out, timeout: *timeout, start: time.Now()}
	err := s.run(ctx, *shards, *run, *compat, *compatMinor, *record)
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(1)
	}
}

// durationsFile holds the seconds each test took in the last recorded run,
// by suite ("e2e", "compat") and test name.
const durationsFile = "e2e/testdata/durations.json"

// defaultSeconds is what a test not in durationsFile is assumed to take.
const defaultSeconds = 20

// expected is the seconds test is expected to take by seconds (one suite's
// recorded durations), defaultSeconds if it has none.
func expected(seconds map[string]float64, test string) float64 {
	if v, ok := seconds[test]; ok {
		return v
	}
	return defaultSeconds
}

type suite struct {
	out     string
	timeout time.Duration
	start   time.Time
	testBin string
	courier string

	mu      sync.Mutex
	results []result
}

// result is one top-level test's outcome in one process.
type result struct {
	suite, job, test, action string
	elapsed                  float64
	output                   []string
}

// toolTests are the tests known to need a tool built in the background,
// with the build scripts each needs.
var toolTests = []struct {
	tests   *regexp.Regexp
	scripts []string
}{
	{regexp.MustCompile(`^(TestArgoRollouts.*|TestExternalSecrets.*)$`), []string{integrationsScript}},
	{regexp.MustCompile(`^(TestReleaseFilesInstallAndRun|TestDocumentedKyvernoPoliciesAreValid)$`), []string{cosignScript, kyvernoScript}},
}

const (
	integrationsScript = "e2e/tools/build-integrations.sh"
	compatScript       = "e2e/tools/build-compat.sh"
	cosignScript       = "release/build-cosign.sh"
	kyvernoScript      = "e2e/tools/build-kyverno.sh"
)

// needs is the build scripts test needs (none if it is not in toolTests).
func needs(test string) []string {
	for _, tt := range toolTests {
		if tt.tests.MatchString(test) {
			return tt.scripts
		}
	}
	return nil
}

// job is one share: its tests (those needing a tool in a second process,
// once the tools are built) and its control plane.
type job struct {
	name, suite string
	tests       []string
	binDir      func(context.Context) (string, error) // the control plane, built when first asked
	env         []string
	built       map[string]chan struct{} // build script → closed once it has run
}

func (s *suite) run(ctx context.Context, shards int, runRE, compatRE, compatMinor string, record bool) error {
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "courier-e2e-suite-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	// The control plane every share needs, then courier (with the race
	// detector, as the suite's TestMain builds it) and the test binary,
	// once for every process.
	binDir, err := script(ctx, "e2e/tools/build.sh")
	if err != nil {
		return err
	}

	// The tools, in the background from now on: one build at a time, the
	// compat control plane second (its process's whole share waits for
	// it; only a test or two waits for each of the others).
	compatBin := make(chan string, 1)
	compatErr := make(chan error, 1)
	built := map[string]chan struct{}{}
	order := []string{integrationsScript, compatScript, cosignScript, kyvernoScript}
	for _, sc := range order {
		built[sc] = make(chan struct{})
	}
	go func() {
		for _, sc := range order {
			if sc == compatScript {
				if compatRE != "" {
					dir, err := script(ctx, sc)
					compatBin <- dir
					compatErr <- err
				}
			} else if _, err := script(ctx, sc); err != nil {
				// The test that needs it runs the script itself and fails with its error.
				fmt.Fprintf(os.Stderr, "e2e: background build %s: %v\n", sc, err)
			}
			close(built[sc])
		}
	}()
	s.courier = os.Getenv("COURIER_E2E_BINARY")
	if s.courier == "" {
		s.courier = filepath.Join(tmp, "courier")
		if err := command(ctx, "go", "build", "-race", "-trimpath", "-o", s.courier, "."); err != nil {
			return fmt.Errorf("build courier: %w", err)
		}
	}
	s.testBin = filepath.Join(tmp, "e2e.test")
	if err := command(ctx, "go", "test", "-c", "-o", s.testBin, "./e2e"); err != nil {
		return fmt.Errorf("build the e2e tests: %w", err)
	}
	all, err := s.list(ctx)
	if err != nil {
		return err
	}
	durations, err := readDurations(durationsFile)
	if err != nil {
		return err
	}

	var jobs []job
	main := matching(all, runRE)
	for i, tests := range spread(main, durations["e2e"], shards) {
		jobs = append(jobs, job{name: fmt.Sprintf("e2e-%d", i+1), suite: "e2e", tests: tests, built: built,
			binDir: func(context.Context) (string, error) { return binDir, nil }})
	}
	var compatTests []string
	if compatRE != "" {
		compatTests = matching(matching(all, compatRE), runRE)
		if len(compatTests) == 0 {
			return fmt.Errorf("-compat %q matches no test", compatRE)
		}
	}
	if len(compatTests) > 0 {
		jobs = append(jobs, job{name: "compat", suite: "compat", tests: compatTests, built: built,
			binDir: func(ctx context.Context) (string, error) {
				select {
				case <-ctx.Done():
					return "", ctx.Err()
				case dir := <-compatBin:
					return dir, <-compatErr
				}
			},
			env: []string{"COURIER_E2E_KUBERNETES_MINOR=" + compatMinor, "COURIER_E2E_COMPAT_SMOKE=1"}})
	}

	total := 0
	for _, j := range jobs {
		total += len(j.tests)
	}
	fmt.Printf("e2e: %d tests in %d processes (%s)\n", total, len(jobs), describe(jobs, durations))
	var wg sync.WaitGroup
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		if len(j.tests) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.runJob(ctx, j)
		}()
	}
	wg.Wait()
	return s.report(jobs, errs, record)
}

// list is every top-level test of the e2e package, from the test binary.
func (s *suite) list(ctx context.Context) ([]string, error) {
	cmd := exec.CommandContext(ctx, s.testBin, "-test.list", ".")
	cmd.Dir = "e2e"
	cmd.Stderr = os.Stderr
	b, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("list the e2e tests: %w", err)
	}
	var tests []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Test") {
			tests = append(tests, l)
		}
	}
	return tests, nil
}

func matching(tests []string, re string) []string {
	if re == "" {
		return tests
	}
	r := regexp.MustCompile(re)
	var out []string
	for _, t := range tests {
		if r.MatchString(t) {
			out = append(out, t)
		}
	}
	return out
}

// spread deals the tests into n shares, longest first, each to the share
// with the least expected time so far (ties to the lowest share).
func spread(tests []string, seconds map[string]float64, n int) [][]string {
	d := func(t string) float64 { return expected(seconds, t) }
	sorted := append([]string(nil), tests...)
	sort.SliceStable(sorted, func(i, j int) bool { return d(sorted[i]) > d(sorted[j]) })
	shares := make([][]string, n)
	load := make([]float64, n)
	for _, t := range sorted {
		k := 0
		for i := range load {
			if load[i] < load[k] {
				k = i
			}
		}
		shares[k] = append(shares[k], t)
		load[k] += d(t)
	}
	return shares
}

func describe(jobs []job, durations map[string]map[string]float64) string {
	var parts []string
	for _, j := range jobs {
		sum := 0.0
		for _, t := range j.tests {
			sum += expected(durations[j.suite], t)
		}
		parts = append(parts, fmt.Sprintf("%s: %d tests, about %s", j.name, len(j.tests), (time.Duration(sum)*time.Second).Round(time.Second)))
	}
	return strings.Join(parts, "; ")
}

// runJob runs one share: its tests that need no tool in one process, then,
// once the tools they need are built, those that do in another.
func (s *suite) runJob(ctx context.Context, j job) error {
	binDir, err := j.binDir(ctx)
	if err != nil {
		return fmt.Errorf("%s: its control plane: %w", j.name, err)
	}
	jsonOut, err := os.Create(filepath.Join(s.out, j.name+".json"))
	if err != nil {
		return err
	}
	defer jsonOut.Close()
	var now, later []string
	waitFor := map[string]bool{}
	for _, t := range j.tests {
		if sc := needs(t); len(sc) > 0 {
			later = append(later, t)
			for _, s := range sc {
				waitFor[s] = true
			}
		} else {
			now = append(now, t)
		}
	}
	if len(now) > 0 {
		if err := s.runProcess(ctx, j, binDir, now, jsonOut); err != nil {
			return err
		}
	}
	if len(later) == 0 {
		return nil
	}
	for sc := range waitFor {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-j.built[sc]:
		}
	}
	return s.runProcess(ctx, j, binDir, later, jsonOut)
}

// runProcess runs tests in one process through test2json and collects each
// top-level test's result as it ends.
func (s *suite) runProcess(ctx context.Context, j job, binDir string, tests []string, jsonOut io.Writer) error {
	names := make([]string, len(tests))
	for i, t := range tests {
		names[i] = regexp.QuoteMeta(t)
	}
	cmd := exec.CommandContext(ctx, "go", "tool", "test2json", "-t", "-p", pkg, s.testBin,
		"-test.v=test2json", "-test.count=1", "-test.timeout="+s.timeout.String(),
		"-test.run=^("+strings.Join(names, "|")+")$")
	cmd.Dir = "e2e"
	cmd.Env = append(os.Environ(), append([]string{"COURIER_CONTROLPLANE_BIN=" + binDir, "COURIER_E2E_BINARY=" + s.courier}, j.env...)...)
	// Ctrl-C reaches the test process, which stops its control plane.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }
	cmd.WaitDelay = time.Minute
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	fmt.Printf("e2e: %s started %d tests (%s)\n", j.name, len(tests), time.Since(s.start).Round(time.Second))
	outputs := map[string][]string{}
	var orphan []string // output of no test: TestMain's
	sc := bufio.NewScanner(io.TeeReader(stdout, jsonOut))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Action, Test, Output string
			Elapsed              float64
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		top, _, _ := strings.Cut(ev.Test, "/")
		switch {
		case ev.Action == "output" && top == "":
			orphan = append(orphan, ev.Output)
		case ev.Action == "output":
			outputs[top] = append(outputs[top], ev.Output)
		case top != "" && ev.Test == top && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
			r := result{suite: j.suite, job: j.name, test: top, action: ev.Action, elapsed: ev.Elapsed, output: outputs[top]}
			delete(outputs, top)
			s.mu.Lock()
			s.results = append(s.results, r)
			s.mu.Unlock()
			fmt.Printf("%-4s %s (%.1fs, %s, %s)\n", strings.ToUpper(ev.Action), top, ev.Elapsed, j.name, time.Since(s.start).Round(time.Second))
			if ev.Action == "fail" {
				fmt.Print(strings.Join(r.output, ""))
			}
		}
	}
	werr := cmd.Wait()
	// A test still running when the process died (a panic, the timeout)
	// never ended: its output is the story.
	for t, o := range outputs {
		s.mu.Lock()
		s.results = append(s.results, result{suite: j.suite, job: j.name, test: t, action: "fail", output: o})
		s.mu.Unlock()
		fmt.Printf("FAIL %s (did not finish, %s)\n%s", t, j.name, strings.Join(o, ""))
	}
	if werr != nil {
		var exit *exec.ExitError
		if !errors.As(werr, &exit) {
			return fmt.Errorf("%s: %w", j.name, werr)
		}
		// Failed tests say why; a process that failed without one (TestMain)
		// says it in its own output.
		fmt.Printf("e2e: %s exited %v; its output outside tests:\n%s", j.name, werr, strings.Join(orphan, ""))
	}
	return nil
}

func (s *suite) report(jobs []job, errs []error, record bool) error {
	got := map[string]result{}
	for _, r := range s.results {
		got[r.suite+"/"+r.test] = r
	}
	var failed, missing []string
	counts := map[string]int{}
	for _, j := range jobs {
		for _, t := range j.tests {
			r, ok := got[j.suite+"/"+t]
			if !ok {
				missing = append(missing, j.suite+"/"+t)
				continue
			}
			counts[r.action]++
			if r.action == "fail" {
				failed = append(failed, j.suite+"/"+t)
			}
		}
	}
	sorted := append([]result(nil), s.results...)
	sort.Slice(sorted, func(i, k int) bool { return sorted[i].elapsed > sorted[k].elapsed })
	fmt.Println("\nThe ten slowest tests:")
	sum := 0.0
	for i, r := range sorted {
		sum += r.elapsed
		if i < 10 {
			fmt.Printf("  %7.1fs  %s (%s)\n", r.elapsed, r.test, r.job)
		}
	}
	// CI shows the tail of this output: each failed test's own lines
	// (what it logged and why it failed, not the courier logs it
	// attached) come last.
	for _, r := range s.results {
		if r.action == "fail" {
			fmt.Printf("\nWhy %s failed (%s):\n%s", r.test, r.job, headlines(r.output))
		}
	}
	wall := time.Since(s.start).Round(time.Second)
	fmt.Printf("Total: %d passed, %d failed, %d skipped, %d did not run; %s of tests in %s wall\n",
		counts["pass"], counts["fail"], counts["skip"], len(missing), (time.Duration(sum) * time.Second).Round(time.Second), wall)

	measured := map[string]map[string]float64{}
	for _, r := range s.results {
		if measured[r.suite] == nil {
			measured[r.suite] = map[string]float64{}
		}
		measured[r.suite][r.test] = float64(int(r.elapsed*10)) / 10
	}
	if err := writeDurations(filepath.Join(s.out, "durations.json"), measured); err != nil {
		return err
	}
	var problems []string
	for _, err := range errs {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	if len(failed) > 0 {
		problems = append(problems, "failed: "+strings.Join(failed, ", "))
	}
	if len(missing) > 0 {
		problems = append(problems, "did not run: "+strings.Join(missing, ", "))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	if record {
		if err := writeDurations(durationsFile, measured); err != nil {
			return err
		}
		fmt.Printf("recorded the durations in %s\n", durationsFile)
	}
	return nil
}

func readDurations(path string) (map[string]map[string]float64, error) {
	d := map[string]map[string]float64{}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

func writeDurations(path string, d map[string]map[string]float64) error {
	b, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// script runs one of the project's build scripts and returns what it prints.
func script(ctx context.Context, path string) (string, error) {
	cmd := exec.CommandContext(ctx, path)
	cmd.Stderr = os.Stderr
	start := time.Now()
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if d := time.Since(start); d > 10*time.Second {
		fmt.Printf("e2e: %s took %s\n", path, d.Round(time.Second))
	}
	return strings.TrimSpace(string(b)), nil
}

func command(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd.Run()
}

// testLine is the first line of a t.Log or t.Error of a test ("    x_test.go:12: ...");
// the lines continuing one (a courier log it attaches) are indented further.
var testLine = regexp.MustCompile(`^\s{4}\S+\.go:\d+: `)

// headlines are the first lines of what a test logged, each cut to 300
// characters.
func headlines(output []string) string {
	var b strings.Builder
	for _, l := range output {
		if !testLine.MatchString(l) && !strings.HasPrefix(l, "--- FAIL") {
			continue
		}
		l = strings.TrimRight(l, "\n")
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}
