// Package notify tells people that courier rolled a workload out: after each
// rollout it POSTs a JSON document to every --notify-url, in courier's own
// form or as a Slack, Microsoft Teams or Google Chat incoming-webhook
// message, naming the cluster when --cluster-name is set. Sending
// never holds up the reloader: rollouts wait in a bounded buffer, each POST
// has a timeout and a few retries, and a failure is counted and logged,
// never fatal.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/courier-k8s/courier/internal/metrics"
)

// Formats of a target's body.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
	FormatTeams = "teams"
	FormatGChat = "gchat"
)

// Target is one --notify-url: where to POST and in which form.
type Target struct {
	URL    string
	Format string
}

// String is the target without its path and query (where webhook URLs
// carry their secret), for logs.
func (t Target) String() string {
	u, err := url.Parse(t.URL)
	if err != nil {
		return t.Format + " (unparsable URL)"
	}
	return t.Format + " " + u.Scheme + "://" + u.Host
}

// Targets is the --notify-url flag: repeatable, each value a comma-separated
// list of URLs, each plain (courier's JSON) or prefixed slack+, teams+ or
// gchat+.
type Targets []Target

func (ts *Targets) String() string {
	out := make([]string, len(*ts))
	for i, t := range *ts {
		out[i] = t.String()
	}
	return strings.Join(out, ",")
}

// Set adds the URLs of v.
func (ts *Targets) Set(v string) error {
	for _, raw := range strings.Split(v, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		t := Target{URL: raw, Format: FormatJSON}
		for _, f := range []string{FormatSlack, FormatTeams, FormatGChat} {
			if rest, ok := strings.CutPrefix(raw, f+"+"); ok {
				t = Target{URL: rest, Format: f}
			}
		}
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			// Not the URL itself: its path may hold a webhook's token.
			return fmt.Errorf("%s: want an http(s) URL, optionally prefixed slack+, teams+ or gchat+", t)
		}
		*ts = append(*ts, t)
	}
	return nil
}

// Rollout is what a notification says: which workload courier rolled out,
// in which cluster (--cluster-name; omitted when unset), which inputs
// changed (names only, never values), and when.
type Rollout struct {
	Cluster   string    `json:"cluster,omitempty"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	Changed   []string  `json:"changed"`
	At        time.Time `json:"at"`
	// NotifyOnly: courier would have rolled it out, but was asked only to
	// tell (courier.dev/reload: notify, --reload-mode=notify).
	NotifyOnly bool `json:"notifyOnly,omitempty"`
}

func (r Rollout) text() string {
	where := ""
	if r.Cluster != "" {
		where = " in cluster " + r.Cluster
	}
	did := "rolled out"
	if r.NotifyOnly {
		did = "would roll out (notify only, nothing restarted)"
	}
	return fmt.Sprintf("courier %s %s %s/%s%s: %s changed", did, r.Kind, r.Namespace, r.Name, where, strings.Join(r.Changed, ", "))
}

// body is what target t receives for r.
func (t Target) body(r Rollout) ([]byte, error) {
	switch t.Format {
	case FormatSlack, FormatGChat:
		// Both take a plain-text message: {"text": …}.
		return json.Marshal(map[string]string{"text": r.text()})
	case FormatTeams:
		return json.Marshal(map[string]string{
			"@type": "MessageCard", "@context": "https://schema.org/extensions",
			"summary": "courier rollout", "text": r.text(),
		})
	}
	event := "rollout"
	if r.NotifyOnly {
		event = "would_roll_out"
	}
	return json.Marshal(struct {
		Event string `json:"event"`
		Rollout
	}{event, r})
}

// Options tune sending; the zero value takes the defaults.
type Options struct {
	// Cluster names the cluster in every notification (--cluster-name).
	Cluster string
	// Timeout bounds one POST (default 5s).
	Timeout time.Duration
	// Attempts per notification and target (default 3), Backoff before the
	// second (default 1s, doubling).
	Attempts int
	Backoff  time.Duration
	// Buffer is how many rollouts may wait (default 1000); beyond it they
	// are dropped and counted.
	Buffer int
}

// Notifier sends notifications. A nil *Notifier sends nothing.
type Notifier struct {
	targets Targets
	opts    Options
	client  *http.Client
	logger  *zap.Logger
	// feeds[i] holds the rollouts waiting for targets[i].
	feeds []chan Rollout
	// drops counts Notify's drops, to log the first and every 100th.
	drops   atomic.Int64
	results *prometheus.CounterVec
}

// New returns the Notifier for targets (nil when there is none).
func New(targets Targets, reg prometheus.Registerer, logger *zap.Logger, o Options) *Notifier {
	if len(targets) == 0 {
		return nil
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.Buffer <= 0 {
		o.Buffer = 1000
	}
	n := &Notifier{
		targets: targets, opts: o, logger: logger.Named("notify"),
		client: &http.Client{Timeout: o.Timeout, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse // a redirect would turn the POST into a GET: a failure, not a delivery
		}},
		feeds: make([]chan Rollout, len(targets)),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metrics.Namespace, Subsystem: "notify", Name: "notifications_total",
			Help: "Rollout notifications by target format (json, slack, teams, gchat) and result: sent, failed (after every retry) or dropped (the buffer was full); only with --notify-url."}, []string{"format", "result"}),
	}
	reg.MustRegister(n.results)
	var formats []string
	for i, t := range targets {
		formats = append(formats, t.Format)
		n.feeds[i] = make(chan Rollout, o.Buffer)
	}
	metrics.Zero(n.results, formats, []string{"sent", "failed", "dropped"})
	return n
}

// Notify queues r for every target without waiting; a target whose buffer
// is full misses it (counted as dropped).
func (n *Notifier) Notify(r Rollout) {
	if n == nil {
		return
	}
	r.Cluster = n.opts.Cluster
	for i, t := range n.targets {
		select {
		case n.feeds[i] <- r:
		default:
			n.results.WithLabelValues(t.Format, "dropped").Inc()
			if d := n.drops.Add(1); d%100 == 1 {
				n.logger.Warn("notification buffer full; rollout notifications dropped (logged once per 100)", zap.Stringer("target", t),
					zap.Int64("droppedSoFar", d), zap.String("workload", r.Kind+" "+r.Namespace+"/"+r.Name))
			}
		}
	}
}

// Run sends until ctx ends, one sender per target, so a slow target holds
// up no other.
func (n *Notifier) Run(ctx context.Context) error {
	if n == nil {
		return nil
	}
	var wg sync.WaitGroup
	for i, t := range n.targets {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					// What still waits is never sent: count it, so that
					// sent + failed + dropped is every rollout.
					if left := len(n.feeds[i]); left > 0 {
						n.results.WithLabelValues(t.Format, "dropped").Add(float64(left))
						n.logger.Warn("shutting down; rollout notifications not sent", zap.Stringer("target", t), zap.Int("count", left))
					}
					return
				case r := <-n.feeds[i]:
					if ctx.Err() != nil {
						n.results.WithLabelValues(t.Format, "dropped").Inc()
						continue
					}
					n.send(ctx, t, r)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// send POSTs r to t, retrying server errors, 429 and network errors.
func (n *Notifier) send(ctx context.Context, t Target, r Rollout) {
	body, err := t.body(r)
	if err != nil {
		n.results.WithLabelValues(t.Format, "failed").Inc()
		return
	}
	wait := n.opts.Backoff
	for attempt := 1; ; attempt++ {
		retry, err := n.post(ctx, t, body)
		if err == nil {
			n.results.WithLabelValues(t.Format, "sent").Inc()
			return
		}
		if !retry || attempt >= n.opts.Attempts || ctx.Err() != nil {
			n.results.WithLabelValues(t.Format, "failed").Inc()
			n.logger.Warn("rollout notification failed", zap.Stringer("target", t), zap.Int("attempts", attempt), zap.Error(err),
				zap.String("workload", r.Kind+" "+r.Namespace+"/"+r.Name))
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait *= 2
	}
}

func (n *Notifier) post(ctx context.Context, t Target, body []byte) (retry bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(body))
	if err != nil {
		return false, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "courier")
	resp, err := n.client.Do(req)
	if err != nil {
		// The error names the URL, secret path included: say only what failed.
		if ue, ok := err.(*url.Error); ok {
			err = fmt.Errorf("POST %s: %w", t, ue.Err)
		}
		return true, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return false, nil
	}
	return resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests, fmt.Errorf("POST %s: %s", t, resp.Status)
}
