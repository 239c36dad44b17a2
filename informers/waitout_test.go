package informers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWaitOutAsksAgainWhileTheAPIServerIsUnavailable: a GET that finds the
// API server unavailable (503, 502, the connection refused) is asked
// again until it answers; a refusal, a write and a cancelled request are
// not.
func TestWaitOutAsksAgainWhileTheAPIServerIsUnavailable(t *testing.T) {
	var calls atomic.Int32
	codes := map[string][]int{"/unavailable": {503, 502, 200}, "/forbidden": {403, 200}, "/error": {500, 200}, "/timeout": {504, 200}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := int(calls.Add(1)) - 1
		seq := codes[r.URL.Path]
		w.WriteHeader(seq[min(n, len(seq)-1)])
	}))
	defer srv.Close()
	client := &http.Client{Transport: waitOut{next: http.DefaultTransport, every: time.Millisecond}}
	for _, c := range []struct {
		method, path string
		want, calls  int
	}{
		{"GET", "/unavailable", 200, 3},
		{"GET", "/timeout", 504, 1}, // also a too large resourceVersion: the reflector lists afresh
		{"GET", "/forbidden", 403, 1},
		{"GET", "/error", 500, 1},
		{"POST", "/unavailable", 503, 1},
	} {
		calls.Store(0)
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", c.method, c.path, err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want || int(calls.Load()) != c.calls {
			t.Errorf("%s %s: %d after %d calls, want %d after %d", c.method, c.path, resp.StatusCode, calls.Load(), c.want, c.calls)
		}
	}

	// A connection refused until the server listens: the GET waits for it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	go func() {
		time.Sleep(50 * time.Millisecond)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	}()
	resp, err := client.Get("http://" + addr + "/")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("after the connection was refused: %v, %v", resp, err)
	}
	resp.Body.Close()

	// Its context ends the waiting, with the last answer.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://127.0.0.1:1/", nil)
	if _, err := client.Do(req); err == nil || !strings.Contains(err.Error(), "refused") && !strings.Contains(err.Error(), "deadline") {
		t.Errorf("a cancelled wait: %v", err)
	}
}
