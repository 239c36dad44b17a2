package e2e

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// faultProxy stands between courier and kube-apiserver (loopback, TLS;
// watches stream through) and counts courier's writes: creates, updates,
// patches and deletes of anything but its Lease and Events that the API
// server accepted. With killAfter k, it SIGKILLs courier right after the
// API server answered the k-th write, before courier reads the answer: the
// write took effect, and courier never learnt it did.
//
// It also perturbs what courier sees: cutWatches ends every watch stream
// it carries (courier's informers watch again from where they were),
// stall holds the events of one resource's watches for a while, and down
// makes the API server unavailable to courier for a while.
type faultProxy struct {
	srv *httptest.Server

	mu        sync.Mutex
	writes    []string // "VERB path" of each write counted
	killAfter int      // 0: never
	victim    *courierProcess
	killed    bool
	watches   map[*http.Request]context.CancelFunc
	stalled   map[string]time.Time // resource → until when its watch events are held
	// beforeWrite, when set, runs once, as the next write courier sends
	// arrives, before it is passed on.
	beforeWrite func()
	downUntil   time.Time // until when every request is answered 503 (down)
	// loseAnswer, when set, picks a write whose answer is lost: the API
	// server applied it, and courier is told etcd timed out (as when etcd
	// commits a write after its deadline). Once: then it is unset.
	loseAnswer func(*http.Request) bool
	lost       int // answers lost
	// timeOut, when set, picks a request the proxy answers itself, as the
	// API server does when etcd timed out (nothing committed). Once.
	timeOut func(*http.Request) bool
}

// etcdTimedOut is the API server's answer when etcd did not commit in time.
const etcdTimedOut = `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"etcdserver: request timed out","code":500}`

func newFaultProxy(t *testing.T) *faultProxy { return newFaultProxyTo(t, env.cluster.Config.Host) }

// newFaultProxyTo is a faultProxy in front of the kube-apiserver at server.
func newFaultProxyTo(t *testing.T, server string) *faultProxy {
	t.Helper()
	upstream, err := url.Parse(server)
	if err != nil {
		t.Fatal(err)
	}
	fp := &faultProxy{watches: map[*http.Request]context.CancelFunc{}, stalled: map[string]time.Time{}}
	rp := httputil.NewSingleHostReverseProxy(upstream)
	transport := &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // the loopback test cluster's self-signed cert
		ForceAttemptHTTP2: true,
	}
	t.Cleanup(transport.CloseIdleConnections)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches: each event as it comes
	// Streams cut by a kube-apiserver restart or cutWatches are the point.
	rp.ErrorLog = log.New(io.Discard, "", 0)
	rp.ModifyResponse = fp.afterUpstream
	rp.ErrorHandler = func(w http.ResponseWriter, _ *http.Request, err error) {
		// courier was killed (nobody reads this), or kube-apiserver is
		// restarting (client-go retries)
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprint(w, err)
	}
	fp.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fp.mu.Lock()
		down := time.Now().Before(fp.downUntil)
		fp.mu.Unlock()
		if down {
			http.Error(w, "the API server is unavailable (fault proxy)", http.StatusServiceUnavailable)
			return
		}
		fp.mu.Lock()
		timeOut := fp.timeOut != nil && fp.timeOut(r)
		if timeOut {
			fp.timeOut = nil
		}
		fp.mu.Unlock()
		if timeOut {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprint(w, etcdTimedOut)
			return
		}
		if counted(r) {
			fp.mu.Lock()
			hook := fp.beforeWrite
			fp.beforeWrite = nil
			fp.mu.Unlock()
			if hook != nil {
				hook()
			}
		}
		if q := r.URL.Query().Get("watch"); q != "true" && q != "1" {
			rp.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		fp.mu.Lock()
		fp.watches[r] = cancel
		fp.mu.Unlock()
		defer func() {
			fp.mu.Lock()
			delete(fp.watches, r)
			fp.mu.Unlock()
		}()
		rp.ServeHTTP(&stallWriter{ResponseWriter: w, fp: fp, resource: resourceOf(r.URL.Path)}, r.WithContext(ctx))
	}))
	fp.srv.EnableHTTP2 = true
	fp.srv.StartTLS()
	t.Cleanup(fp.srv.Close)
	return fp
}

// counted reports whether r is one of the writes the proxy counts.
func counted(r *http.Request) bool {
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return false
	}
	if r.URL.Query().Get("dryRun") != "" {
		return false
	}
	p := r.URL.Path
	return !strings.Contains(p, "/leases/") && !strings.HasSuffix(p, "/leases") && !strings.Contains(p, "/events")
}

var errKilled = errors.New("courier was killed at this crash point")

func (fp *faultProxy) afterUpstream(resp *http.Response) error {
	r := resp.Request
	if !counted(r) || resp.StatusCode/100 != 2 {
		return nil
	}
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.writes = append(fp.writes, r.Method+" "+r.URL.Path)
	if fp.loseAnswer != nil && fp.loseAnswer(r) {
		fp.loseAnswer = nil
		fp.lost++
		resp.Body.Close()
		resp.StatusCode, resp.Status = http.StatusInternalServerError, "500 Internal Server Error"
		resp.Header = http.Header{"Content-Type": {"application/json"}}
		resp.Body, resp.ContentLength = io.NopCloser(strings.NewReader(etcdTimedOut)), int64(len(etcdTimedOut))
		return nil
	}
	if len(fp.writes) != fp.killAfter || fp.victim == nil {
		return nil
	}
	fp.victim.kill()
	fp.killed = true
	return errKilled
}

// cutWatches ends every watch stream in flight and returns how many.
func (fp *faultProxy) cutWatches() int {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	for _, cancel := range fp.watches {
		cancel()
	}
	return len(fp.watches)
}

// down makes the API server unavailable to courier for d: the watches in
// flight are cut, and every request is answered 503.
func (fp *faultProxy) down(d time.Duration) {
	fp.mu.Lock()
	fp.downUntil = time.Now().Add(d)
	fp.mu.Unlock()
	fp.cutWatches()
}

// stall holds the events of resource's watches (e.g. "secrets") for d.
func (fp *faultProxy) stall(resource string, d time.Duration) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.stalled[resource] = time.Now().Add(d)
}

func (fp *faultProxy) stalledUntil(resource string) time.Time {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return fp.stalled[resource]
}

// stallWriter passes a watch's events on, holding them while the proxy
// stalls its resource.
type stallWriter struct {
	http.ResponseWriter
	fp       *faultProxy
	resource string
}

func (s *stallWriter) Write(b []byte) (int, error) {
	if d := time.Until(s.fp.stalledUntil(s.resource)); d > 0 {
		time.Sleep(d)
	}
	return s.ResponseWriter.Write(b)
}

func (s *stallWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// resourceOf is the resource a request path names:
// /api/v1/namespaces/a/secrets → secrets.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	if i := slices.Index(parts, "namespaces"); i >= 0 && len(parts) > i+2 {
		return parts[i+2]
	}
	return parts[len(parts)-1]
}

// arm makes the proxy kill p after the k-th write (0: never).
func (fp *faultProxy) arm(p *courierProcess, k int) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	fp.victim, fp.killAfter = p, k
}

func (fp *faultProxy) state() (writes []string, killed bool) {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return append([]string(nil), fp.writes...), fp.killed
}

// kubeconfigAt is id's kubeconfig with server as its server.
func kubeconfigAt(t *testing.T, id identity, server string) string {
	t.Helper()
	path := writeKubeconfig(t, id)
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = server
	}
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// kubeconfig is id's kubeconfig with the proxy as its server.
func (fp *faultProxy) kubeconfig(t *testing.T, id identity) string {
	return kubeconfigAt(t, id, fp.srv.URL)
}

// kill SIGKILLs courier and waits until it is gone.
func (p *courierProcess) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}
