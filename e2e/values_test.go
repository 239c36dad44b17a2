package e2e

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SECURITY.md: no Secret value ever reaches a log line or an Event. The
// suite checks it of every test: each value a test writes into a Secret
// through the helpers is recorded; every courier's log (at debug level) is
// scanned for them when it stops, and every Event in a test's namespaces
// when they are deleted.

// written is every Secret value the tests wrote.
var written = struct {
	sync.Mutex
	values map[string]bool
}{values: map[string]bool{}}

// minValueLen: shorter values ("1", "v", "ok") are what logs say for other
// reasons.
const minValueLen = 4

func recordValues(data map[string][]byte) {
	written.Lock()
	defer written.Unlock()
	for _, v := range data {
		if len(v) >= minValueLen {
			written.values[string(v)] = true
		}
	}
}

// leaks returns the written values that text holds the way a leak would
// show: a whole JSON string (a log field), a quoted part of a message (Go's
// %q, escaped in JSON or not), "=value", or, for values of 8 characters or
// more, anywhere.
func leaks(text string) []string {
	written.Lock()
	defer written.Unlock()
	var out []string
	for v := range written.values {
		q := strconv.Quote(v)
		escaped := `\"` + q[1:len(q)-1] + `\"`
		if strings.Contains(text, q) || strings.Contains(text, escaped) || strings.Contains(text, "="+v+`"`) ||
			strings.Contains(text, "="+v+",") || (len(v) >= 8 && strings.Contains(text, v)) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// noValuesIn fails t if text (what says where) holds a written value.
func noValuesIn(t *testing.T, what, text string) {
	t.Helper()
	if l := leaks(text); len(l) > 0 {
		t.Errorf("%s holds Secret values the tests wrote: %q", what, l)
	}
}

// noValuesInEvents fails t if an Event in namespace ns holds a written value.
func noValuesInEvents(t *testing.T, ns string) {
	t.Helper()
	events, err := admin().CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		return // the namespace is gone already
	}
	for _, e := range events.Items {
		noValuesIn(t, "Event "+e.Reason+" on "+e.InvolvedObject.Kind+" "+ns+"/"+e.InvolvedObject.Name, e.Message)
	}
}

// TestLeaksAreFound shows the check can fail: a value planted in a log line
// and in an Event message, each way a leak would show, is found.
func TestLeaksAreFound(t *testing.T) {
	recordValues(map[string][]byte{"k": []byte("pl4nted-value")})
	for _, line := range []string{
		`{"level":"debug","msg":"replica written","value":"pl4nted-value"}`,
		`{"level":"error","msg":"sync failed","error":"invalid value \"pl4nted-value\" for flag"}`,
		`rolled out because pl4nted-value changed`,
	} {
		if got := leaks(line); !slices.Equal(got, []string{"pl4nted-value"}) {
			t.Errorf("leaks(%s) = %q, want the planted value", line, got)
		}
	}
	if got := leaks(`{"msg":"replica written","pair":"Secret src/db → dst"}`); len(got) > 0 {
		t.Errorf("a clean line reported: %q", got)
	}
	written.Lock()
	delete(written.values, "pl4nted-value")
	written.Unlock()
}
