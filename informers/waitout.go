package informers

import (
	"errors"
	"io"
	"net"
	"net/http"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// WaitOutEvery is how often the informers' client asks again an API server
// that could not serve it (WaitOut).
const WaitOutEvery = 500 * time.Millisecond

// waitOutAtMost is how long one request waits out: then its failure
// reaches the reflector (and courier's watch error handlers, which report
// a kind that stays unavailable), and the reflector tries again.
const waitOutAtMost = time.Minute

// WaitOut returns a copy of cfg for the informers' clients: a list or watch
// (any GET) that finds the API server unavailable — the connection refused,
// reset or cut, or an answer of 502 or 503 — is asked again every
// WaitOutEvery for as long as its context lasts, up to a minute, and
// returns once the API server answers. Left to client-go, each such failure counts against the
// reflector's backoff (from 0.8 s doubling to 30 s, with up to as much
// again of jitter, and reset only after two minutes without a failure), so
// an API server restarted a few times within two minutes left courier's
// caches stale for up to a minute after it was back: a protected source
// deleted meanwhile stayed gone, a changed source unreplicated. Any other
// answer (forbidden, not found, gone, a certificate refused) reaches the
// reflector at once, as before.
//
// Only the informers' clients wait: the Lease and every write fail fast.
func WaitOut(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(rt http.RoundTripper) http.RoundTripper { return waitOut{next: rt, every: WaitOutEvery} })
	return c
}

type waitOut struct {
	next  http.RoundTripper
	every time.Duration
}

func (w waitOut) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet || req.Body != nil && req.Body != http.NoBody {
		return w.next.RoundTrip(req)
	}
	for start := time.Now(); ; {
		resp, err := w.next.RoundTrip(req)
		if !unavailable(resp, err) || time.Since(start) > waitOutAtMost {
			return resp, err
		}
		timer := time.NewTimer(w.every)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return resp, err
		case <-timer.C:
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
		}
	}
}

// unavailable reports whether a request's outcome says the API server (or
// the way to it) is not serving now, rather than refusing the request.
func unavailable(resp *http.Response, err error) bool {
	if err != nil {
		return unavailableConn(err)
	}
	// Not 504: the API server answers a too large resourceVersion with it,
	// which the reflector handles by listing afresh.
	return resp.StatusCode == http.StatusBadGateway || resp.StatusCode == http.StatusServiceUnavailable
}

// unavailableConn reports whether err says the connection to the API server
// failed: refused, reset, cut, timed out.
func unavailableConn(err error) bool {
	var ne net.Error
	return utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		errors.As(err, &ne) && ne.Timeout()
}
