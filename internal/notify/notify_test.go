package notify

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/zap"
)

// hook is a webhook receiver on loopback answering with the statuses given,
// then 200.
type hook struct {
	mu       sync.Mutex
	statuses []int
	bodies   []string
	srv      *httptest.Server
}

func newHook(t *testing.T, statuses ...int) *hook {
	h := &hook{statuses: statuses}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.bodies = append(h.bodies, string(b))
		status := http.StatusOK
		if len(h.statuses) > 0 {
			status, h.statuses = h.statuses[0], h.statuses[1:]
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hook) received() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.bodies...)
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestTargetsParse(t *testing.T) {
	var ts Targets
	if err := ts.Set("https://a.example/x, slack+https://hooks.slack.com/services/T/B/secret"); err != nil {
		t.Fatal(err)
	}
	if err := ts.Set("teams+http://127.0.0.1:1/y"); err != nil {
		t.Fatal(err)
	}
	if len(ts) != 3 || ts[0].Format != FormatJSON || ts[1].Format != FormatSlack || ts[1].URL != "https://hooks.slack.com/services/T/B/secret" || ts[2].Format != FormatTeams {
		t.Errorf("targets = %+v", ts)
	}
	if strings.Contains(ts.String(), "secret") {
		t.Errorf("String() shows the webhook's secret path: %s", ts.String())
	}
	for _, bad := range []string{"ftp://x/TOKEN", "slack+", "hooks.slack.com/TOKEN", "https://ok.example/TOKEN,htps://typo/TOKEN"} {
		err := (&Targets{}).Set(bad)
		if err == nil {
			t.Errorf("%q: no error", bad)
		} else if strings.Contains(err.Error(), "TOKEN") {
			t.Errorf("%q: the error shows the URL's path: %v", bad, err)
		}
	}
}

func TestEachFormatIsSentAndServerErrorsAreRetried(t *testing.T) {
	plain, slack, teams := newHook(t, http.StatusServiceUnavailable), newHook(t), newHook(t, http.StatusBadRequest)
	reg := prometheus.NewRegistry()
	n := New(Targets{{plain.srv.URL, FormatJSON}, {slack.srv.URL, FormatSlack}, {teams.srv.URL, FormatTeams}}, reg, zap.NewNop(),
		Options{Backoff: time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	at := time.Date(2026, 11, 24, 1, 2, 3, 0, time.UTC)
	n.Notify(Rollout{Kind: "Deployment", Namespace: "shop", Name: "web", Changed: []string{"secret/db"}, At: at})
	waitFor(t, "every target answered", func() bool {
		return len(plain.received()) == 2 && len(slack.received()) == 1 && len(teams.received()) == 1
	})
	var got map[string]any
	if err := json.Unmarshal([]byte(plain.received()[1]), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"event": "rollout", "kind": "Deployment", "namespace": "shop", "name": "web", "changed": []any{"secret/db"}, "at": "2026-11-24T01:02:03Z"}
	if !equalJSON(got, want) {
		t.Errorf("JSON body = %v, want %v", got, want)
	}
	text := "courier rolled out Deployment shop/web: secret/db changed"
	if s := slack.received()[0]; s != `{"text":"`+text+`"}` {
		t.Errorf("Slack body = %s", s)
	}
	if s := teams.received()[0]; !strings.Contains(s, `"@type":"MessageCard"`) || !strings.Contains(s, text) {
		t.Errorf("Teams body = %s", s)
	}
	waitFor(t, "counted", func() bool {
		return testutil.ToFloat64(n.results.WithLabelValues(FormatJSON, "sent")) == 1 &&
			testutil.ToFloat64(n.results.WithLabelValues(FormatSlack, "sent")) == 1 &&
			testutil.ToFloat64(n.results.WithLabelValues(FormatTeams, "failed")) == 1 // a 400 is not retried
	})
}

func equalJSON(a, b map[string]any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// A target that never answers holds up neither Notify nor the other targets.
func TestASlowTargetHoldsUpNothing(t *testing.T) {
	block := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer slow.Close()
	defer close(block)
	fast := newHook(t)
	n := New(Targets{{slow.URL, FormatJSON}, {fast.srv.URL, FormatJSON}}, prometheus.NewRegistry(), zap.NewNop(),
		Options{Timeout: time.Minute, Buffer: 2, Attempts: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	start := time.Now()
	for range 10 {
		n.Notify(Rollout{Kind: "Deployment", Namespace: "a", Name: "b", Changed: []string{"secret/c"}})
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Notify waited %s", d)
	}
	waitFor(t, "the fast target got what its buffer held", func() bool { return len(fast.received()) >= 2 })
	waitFor(t, "the slow target's overflow counted", func() bool {
		return testutil.ToFloat64(n.results.WithLabelValues(FormatJSON, "dropped")) >= 7
	})
}

// A redirect would turn the POST into a GET without its body: it is a
// failure, never counted as sent.
func TestARedirectIsNotADelivery(t *testing.T) {
	target := newHook(t)
	redirect := httptest.NewServer(http.RedirectHandler(target.srv.URL, http.StatusFound))
	defer redirect.Close()
	n := New(Targets{{redirect.URL, FormatJSON}}, prometheus.NewRegistry(), zap.NewNop(), Options{Attempts: 1})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = n.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	n.Notify(Rollout{Kind: "Deployment", Namespace: "a", Name: "b", Changed: []string{"secret/c"}})
	waitFor(t, "counted as failed", func() bool { return testutil.ToFloat64(n.results.WithLabelValues(FormatJSON, "failed")) == 1 })
	if got := target.received(); len(got) != 0 {
		t.Errorf("the redirect was followed: %v", got)
	}
}
