package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// webhooks is an HTTP server on loopback recording what each path receives;
// /broken always answers 500.
type webhooks struct {
	mu     sync.Mutex
	bodies map[string][]string
	url    string
}

func startWebhooks(t *testing.T) *webhooks {
	t.Helper()
	w := &webhooks{bodies: map[string][]string{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.mu.Lock()
		w.bodies[r.URL.Path] = append(w.bodies[r.URL.Path], string(b))
		w.mu.Unlock()
		if r.URL.Path == "/broken" {
			rw.WriteHeader(http.StatusInternalServerError)
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	w.url = "http://" + l.Addr().String()
	return w
}

func (w *webhooks) received(path string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.bodies[path]...)
}

// SPEC (--notify-url): after each rollout courier POSTs a JSON document
// naming the workload and what changed (names only, never values), or a
// Slack/Teams message; a failing URL is retried, counted and logged, and
// holds nothing up.
func TestRolloutNotifications(t *testing.T) {
	hooks := startWebhooks(t)
	s := setupReplication(t, "--notify-url="+hooks.url+"/hook,slack+"+hooks.url+"/slack", "--notify-url=teams+"+hooks.url+"/teams,"+hooks.url+"/broken")
	ns := s.target(t, "notify", nil)
	createSecret(t, ns, "db", withData("password", "first-value"))
	createDeployment(t, ns, "web", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))
	before := settled(t, ns, "web")

	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("s3cr3t-v4lue") })
	rolledOutOnce(t, ns, "web", before, "secret/db")
	eventually(t, converge, "every webhook received the rollout", func(context.Context) (bool, error) {
		return len(hooks.received("/hook")) == 1 && len(hooks.received("/slack")) == 1 && len(hooks.received("/teams")) == 1, nil
	})
	var got struct {
		Event, Kind, Namespace, Name, At string
		Changed                          []string
	}
	if err := json.Unmarshal([]byte(hooks.received("/hook")[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Event != "rollout" || got.Kind != "Deployment" || got.Namespace != ns || got.Name != "web" || len(got.Changed) != 1 || got.Changed[0] != "secret/db" || got.At == "" {
		t.Errorf("notification %+v", got)
	}
	text := "courier rolled out Deployment " + ns + "/web: secret/db changed"
	if b := hooks.received("/slack")[0]; b != `{"text":"`+text+`"}` {
		t.Errorf("Slack body %s", b)
	}
	if b := hooks.received("/teams")[0]; !strings.Contains(b, "MessageCard") || !strings.Contains(b, text) {
		t.Errorf("Teams body %s", b)
	}
	for _, path := range []string{"/hook", "/slack", "/teams", "/broken"} {
		for _, b := range hooks.received(path) {
			if strings.Contains(b, "s3cr3t") || strings.Contains(b, "first-value") {
				t.Errorf("%s received a value: %s", path, b)
			}
		}
	}
	// The broken URL: three attempts (1 s and 2 s apart), then counted as
	// failed and logged; the others were not held up meanwhile.
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{
		`courier_notify_notifications_total{format="json",result="sent"}`:   1,
		`courier_notify_notifications_total{format="json",result="failed"}`: 1,
		`courier_notify_notifications_total{format="slack",result="sent"}`:  1,
		`courier_notify_notifications_total{format="teams",result="sent"}`:  1,
	})
	if n := len(hooks.received("/broken")); n != 3 {
		t.Errorf("the broken URL was tried %d times, want 3", n)
	}
	if logs := s.courier.Logs(); !strings.Contains(logs, "rollout notification failed") || strings.Contains(logs, "/broken") {
		t.Errorf("want a log line for the failure that does not show the URL's path")
	}
}

// README: an invalid --notify-url (flag or environment twin) stops courier
// with an error naming it by scheme and host only: the path of a webhook
// URL is its token, and never reaches a log.
func TestAnInvalidNotifyURLNeverPrintsItsToken(t *testing.T) {
	const token = "T000/B000/XXXXSECRET"
	for _, c := range []struct{ arg, env string }{
		{arg: "--notify-url=ftp://hooks.example.com/services/" + token},
		{env: "COURIER_NOTIFY_URL=slack+https://hooks.example.com/services/" + token + "%zz"},
	} {
		cmd := exec.CommandContext(t.Context(), env.courier, "--kubeconfig=/nonexistent")
		if c.arg != "" {
			cmd.Args = append(cmd.Args, c.arg)
		}
		cmd.Env = append(os.Environ(), c.env)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 {
			t.Errorf("%s%s: exit %v, want 2\n%s", c.arg, c.env, err, out)
		}
		if strings.Contains(string(out), token) || !strings.Contains(string(out), "--notify-url") || !strings.Contains(string(out), "hooks.example.com") && !strings.Contains(string(out), "unparsable") {
			t.Errorf("%s%s: output %q; want the flag named by scheme and host, never the token", c.arg, c.env, out)
		}
	}
}

// SPEC (--notify-url, --cluster-name): a gchat+ URL gets a Google Chat
// incoming-webhook message, and with --cluster-name every notification, in
// every format, names the cluster, so one channel can serve many clusters.
func TestGoogleChatNotificationsNameTheCluster(t *testing.T) {
	hooks := startWebhooks(t)
	s := setupReplication(t, "--notify-url=gchat+"+hooks.url+"/gchat,"+hooks.url+"/hook", "--cluster-name=prod-eu")
	ns := s.target(t, "notify", nil)
	createSecret(t, ns, "db", withData("password", "first-value"))
	createDeployment(t, ns, "web", map[string]string{keyReload: "true"}, podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))
	before := settled(t, ns, "web")

	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("s3cr3t-v4lue") })
	rolledOutOnce(t, ns, "web", before, "secret/db")
	eventually(t, converge, "both webhooks received the rollout", func(context.Context) (bool, error) {
		return len(hooks.received("/gchat")) == 1 && len(hooks.received("/hook")) == 1, nil
	})
	want := `{"text":"courier rolled out Deployment ` + ns + `/web in cluster prod-eu: secret/db changed"}`
	if b := hooks.received("/gchat")[0]; b != want {
		t.Errorf("Google Chat body %s, want %s", b, want)
	}
	var got struct{ Cluster, Name string }
	if err := json.Unmarshal([]byte(hooks.received("/hook")[0]), &got); err != nil || got.Cluster != "prod-eu" || got.Name != "web" {
		t.Errorf("JSON notification %s (%v): want cluster prod-eu", hooks.received("/hook")[0], err)
	}
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{
		`courier_notify_notifications_total{format="gchat",result="sent"}`: 1,
		`courier_notify_notifications_total{format="json",result="sent"}`:  1,
	})
}
