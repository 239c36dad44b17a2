package settings

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/courier-k8s/courier/internal/config"
)

func options(t *testing.T, args ...string) config.Options {
	t.Helper()
	o, err := config.Parse(args, func(string) string { return "" }, nil)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func TestOfPublishesNoSecret(t *testing.T) {
	s := Of(options(t, "--namespace=ops", "--notify-url=slack+https://hooks.example.com/T0/B0/s3cr3t-token", "--compat=reloader"), "courier 1.0.0")
	if s.Namespace != "ops" || s.SourceNamespaces != "ops" || s.Compat != "reloader" || strings.Join(s.NotifyFormats, ",") != "slack" {
		t.Errorf("Of = %+v", s)
	}
	b, err := json.Marshal(s) // every field, as published
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cr3t") || strings.Contains(string(b), "hooks.example.com") {
		t.Errorf("settings hold the webhook URL: %s", b)
	}
}

func writes(c *fake.Clientset) (n int) {
	for _, a := range c.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" {
			n++
		}
	}
	return n
}

func TestPublishWritesOnlyWhatChanged(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	rec := record.NewFakeRecorder(10)
	s := Of(options(t, "--namespace=ops"), "courier 1.0.0")
	for range 2 { // the second term, same flags: nothing to write
		if err := Publish(ctx, c, s, rec, zap.NewNop()); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes(c); n != 1 {
		t.Errorf("two terms with the same settings: %d writes, want 1 (the create)", n)
	}
	s.Compat = "reflector"
	if err := Publish(ctx, c, s, rec, zap.NewNop()); err != nil {
		t.Fatal(err)
	}
	got, _, err := List(ctx, c, "")
	if err != nil || len(got) != 1 || got[0].Compat != "reflector" || got[0].Namespace != "ops" || writes(c) != 2 {
		t.Errorf("after a change: %+v, %v, %d writes; want the new settings in one update", got, err, writes(c))
	}
}

func TestPublishLeavesAForeignConfigMapAlone(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: Name}, Data: map[string]string{"mine": "x"}})
	rec := record.NewFakeRecorder(10)
	err := Publish(ctx, c, Of(options(t, "--namespace=ops"), "courier 1.0.0"), rec, zap.NewNop())
	if err == nil || !strings.Contains(err.Error(), "did not create it") {
		t.Errorf("Publish = %v, want an error saying courier did not create it", err)
	}
	if writes(c) != 0 {
		t.Errorf("courier wrote a ConfigMap it does not own: %v", c.Actions())
	}
	if ev := <-rec.Events; !strings.Contains(ev, "SettingsBlocked") {
		t.Errorf("event %q, want SettingsBlocked", ev)
	}
	if got, _, _ := List(ctx, c, ""); len(got) != 0 {
		t.Errorf("List read a ConfigMap courier did not make: %+v", got)
	}
}

func TestListSkipsWhatItCannotRead(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/managed-by": "courier", "courier.dev/settings": "true"}
	c := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: Name, Labels: labels}, Data: map[string]string{Key: `{"sourceNamespaces": "a"}`}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: Name, Labels: labels}, Data: map[string]string{Key: `{"sourceNamespaces": 7}`}},
	)
	got, skipped, err := List(context.Background(), c, "")
	if err != nil || len(got) != 1 || got[0].Namespace != "a" || len(skipped) != 1 || !strings.Contains(skipped[0], "b/"+Name) {
		t.Errorf("List = %+v, %q, %v; want a's, and b's named as skipped", got, skipped, err)
	}
}

func TestCheckRunning(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	lease := func(ns, holder string, renewed time.Time) *coordinationv1.Lease {
		d := int32(10)
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "courier"},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &d, RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	c := fake.NewClientset(lease("live", "pod-a", now.Add(-3*time.Second)), lease("stale", "pod-a", now.Add(-time.Hour)), lease("released", "", now))
	for _, tc := range []struct {
		ns          string
		leaderElect bool
		want        string
	}{
		{"live", true, ""},
		{"stale", true, "last renewed 1h0m0s ago"},
		{"released", true, "no process holds"},
		{"gone", true, "is gone"},
		{"gone", false, ""}, // no leader election: no Lease to tell
	} {
		i := Installation{Settings: Settings{Namespace: tc.ns, LeaderElect: tc.leaderElect}}
		CheckRunning(context.Background(), c, &i, now)
		if (tc.want == "") != (i.NotRunning == "") || !strings.Contains(i.NotRunning, tc.want) {
			t.Errorf("%s (leader election %v): NotRunning = %q, want %q", tc.ns, tc.leaderElect, i.NotRunning, tc.want)
		}
	}
}
