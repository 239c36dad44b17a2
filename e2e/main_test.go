package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/courier-k8s/courier/e2e/cluster"
	"github.com/courier-k8s/courier/e2e/oracle"
)

// env is the state every test shares: the cluster and the courier binary.
var env struct {
	cluster *cluster.Cluster
	courier string // path of the courier binary under test
	root    string // repository root
	binDir  string // control-plane binaries, kubectl among them
	rbac    manifestRBAC
}

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	// Listing the tests (make e2e spreads them over processes) needs no cluster.
	flag.Parse()
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return m.Run()
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Ctrl-C: stop the cluster (if it is up) before exiting, whatever runs.
	var started atomic.Pointer[cluster.Cluster]
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		cancel()
		if c := started.Load(); c != nil {
			c.Stop()
		}
		os.Exit(1)
	}()

	root, err := filepath.Abs("..")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env.root = root
	binDir := os.Getenv("COURIER_CONTROLPLANE_BIN")
	if binDir == "" {
		out, err := exec.CommandContext(ctx, filepath.Join(root, "e2e/tools/build.sh")).Output()
		if err != nil {
			fmt.Fprintf(os.Stderr, "build the control plane: %v\n", err)
			return 1
		}
		binDir = strings.TrimSpace(string(out))
	}

	tmp, err := os.MkdirTemp("", "courier-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	env.courier = filepath.Join(tmp, "courier")
	if bin := os.Getenv("COURIER_E2E_BINARY"); bin != "" {
		// Another build of courier, e.g. an older commit's, to show a new
		// test failing on it.
		env.courier = bin
	} else {
		// The race detector watches courier while the tests drive it; a race
		// fails the test that stops that process (see courierProcess.Stop).
		build := exec.CommandContext(ctx, "go", "build", "-race", "-trimpath", "-o", env.courier, ".")
		build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "build courier: %v\n", err)
			return 1
		}
	}

	start := time.Now()
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, AuditPolicy: oracle.Policy})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the control plane: %v\n", err)
		return 1
	}
	defer c.Stop()
	env.cluster = c
	env.binDir = binDir
	started.Store(c)
	sv, err := c.Client.Discovery().ServerVersion()
	if err != nil {
		fmt.Fprintf(os.Stderr, "the API server's version: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: Kubernetes %s control plane ready in %s\n", sv.GitVersion, time.Since(start).Round(time.Millisecond))
	// make test-compat and test-compat-smoke say which minor they mean to
	// test: a suite that ran on another would prove nothing about it.
	if want := os.Getenv("COURIER_E2E_KUBERNETES_MINOR"); want != "" && strings.TrimSuffix(sv.Minor, "+") != want {
		fmt.Fprintf(os.Stderr, "e2e: the API server is Kubernetes %s, want minor %s (COURIER_E2E_KUBERNETES_MINOR)\n", sv.GitVersion, want)
		return 1
	}

	// Every courier runs as its ServiceAccount with the RBAC of manifests/.
	objs, err := renderManifests(ctx, "manifests")
	if err == nil {
		env.rbac, err = rbacFrom(objs)
	}
	if err == nil {
		err = courierIdentity().grantCluster(ctx)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "courier's RBAC from manifests/: %v\n", err)
		return 1
	}

	code := m.Run()
	if chaos.violations.Load() > 0 && chaosAll() {
		// The audit log the oracle read, to see what a violation was.
		os.Setenv("COURIER_KEEP_CLUSTER_DIR", "1")
		fmt.Fprintf(os.Stderr, "kept the cluster's directory, with the audit log the oracle read: %s\n", env.cluster.Dir)
	}
	if line := chaosSummary(); line != "" {
		fmt.Fprintln(os.Stderr, line)
	}
	return code
}
