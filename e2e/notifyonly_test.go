package e2e

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// SPEC (Reload, notify only): courier.dev/reload: notify on a workload (and
// --reload-mode=notify for all) opts it in to be told, not rolled out: no
// rollout, a Normal ReloadNotified Event and a notification say what would
// have rolled out and why, each change is told once, and courier status
// marks the consumer "notify only".
func TestNotifyOnlyTellsAndRollsNothingOut(t *testing.T) {
	hooks := startWebhooks(t)
	s := setupReplication(t, "--notify-url="+hooks.url+"/hook")
	ns := s.target(t, "notify-only", nil)
	createSecret(t, s.src, "db", withAnnotation(keyReplicateTo, "test="+s.id), withData("password", "v1"))
	eventually(t, converge, "replica of db", secretIn(ns, "db", map[string][]byte{"password": []byte("v1")}))
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil)
	createDeployment(t, ns, "watched", map[string]string{keyReload: "notify"}, spec)
	createDeployment(t, ns, "normal", map[string]string{keyReload: "true"}, spec)
	settled(t, ns, "watched")
	settled(t, ns, "normal")

	updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v2") })
	rolledOutOnce(t, ns, "normal", 1, "secret/db")
	eventually(t, converge, "ReloadNotified on watched", eventWith(ns, "watched", "ReloadNotified", "would roll out because secret/db changed", "courier.dev/reload=notify"))
	noRollout(t, ns, "watched", 1)
	type body struct {
		Event, Name string
		NotifyOnly  bool
	}
	eventually(t, converge, "both notifications", func(context.Context) (bool, error) { return len(hooks.received("/hook")) == 2, nil })
	got := map[string]body{}
	for _, b := range hooks.received("/hook") {
		var x body
		if err := json.Unmarshal([]byte(b), &x); err != nil {
			t.Fatal(err)
		}
		got[x.Name] = x
	}
	if got["watched"] != (body{"would_roll_out", "watched", true}) || got["normal"] != (body{"rollout", "normal", false}) {
		t.Errorf("notifications: %+v", got)
	}
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{
		`courier_reloader_reloads_total{kind="Deployment",result="notified"}`: 1,
		`courier_reloader_reloads_total{kind="Deployment",result="success"}`:  1,
	})
	r := statusReport(t, "--namespace="+s.courier.namespace)
	src := sourceIn(r, s.src+"/db")
	if src == nil {
		t.Fatal("status lacks the source")
	}
	for _, c := range src.Consumers {
		if c.NotifyOnly != (c.Name == "watched") {
			t.Errorf("consumer %s: notifyOnly %v", c.Name, c.NotifyOnly)
		}
	}
	if table := courierStatus(t, "--namespace="+s.courier.namespace); !strings.Contains(table, "Deployment "+ns+"/watched (notify only)") {
		t.Errorf("the table does not mark watched notify only:\n%s", table)
	}

	// --reload-mode=notify: the same for every workload.
	s.courier.Stop()
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--reload-mode=notify", "--notify-url="+hooks.url+"/hook")
	c.WaitLeader(t.Context())
	updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v3") })
	eventually(t, converge, "ReloadNotified on normal", eventWith(ns, "normal", "ReloadNotified", "--reload-mode=notify"))
	noRollout(t, ns, "normal", 2)
	noRollout(t, ns, "watched", 1)
}
