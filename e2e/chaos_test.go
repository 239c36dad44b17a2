package e2e

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/courier-k8s/courier/e2e/oracle"
)

// chaos tallies what the fault campaign did in this run of the suite: the
// crash points tried, the perturbations (courier killed, the leader
// changed, kube-apiserver or etcd restarted, watches cut), the random
// transitions and the oracle's violations. make chaos ends with its line.
var chaos struct {
	crashPoints, perturbations, transitions, violations atomic.Int64
}

// chaosSummary is the campaign's one line, or "" when no part of it ran.
func chaosSummary() string {
	if chaos.crashPoints.Load()+chaos.transitions.Load() == 0 {
		return ""
	}
	return fmt.Sprintf("crash points: %d tried; perturbations: %d; transitions: %d; violations: %d",
		chaos.crashPoints.Load(), chaos.perturbations.Load(), chaos.transitions.Load(), chaos.violations.Load())
}

// chaosAll reports whether the whole campaign runs (make chaos sets
// COURIER_CHAOS): every crash-point scenario rather than make test's part.
func chaosAll() bool { return os.Getenv("COURIER_CHAOS") != "" }

func reportViolations(t *testing.T, what string, vs []oracle.Violation) {
	t.Helper()
	for _, v := range vs {
		chaos.violations.Add(1)
		t.Errorf("%s: violation: %s", what, v)
	}
}

// writesOnceSettled are violations for the writes scope's courier made
// once the cluster had settled at settledAt (a second of grace for the
// Events of its last write, which it sends after that write).
func writesOnceSettled(events []oracle.Event, scope oracle.Scope, settledAt time.Time) []oracle.Violation {
	var vs []oracle.Violation
	for _, e := range oracle.Writes(events, scope.Courier, settledAt.Add(time.Second), scope.Namespaces) {
		vs = append(vs, oracle.Violation{Rule: "wrote after the cluster had settled", Request: e.String(), At: e.At})
	}
	return vs
}

// auditMark is where the audit log ends now: a scenario judges what was
// written after it.
func auditMark(t *testing.T) int64 {
	t.Helper()
	fi, err := os.Stat(env.cluster.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// auditSince reads the audit log's complete lines written after mark.
func auditSince(t *testing.T, mark int64) []oracle.Event {
	t.Helper()
	f, err := os.Open(env.cluster.AuditLog)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(mark, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	b = b[:bytes.LastIndexByte(b, '\n')+1] // a line being written is left for later
	events, err := oracle.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return events
}
