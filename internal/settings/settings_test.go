package settings

import (
	"context"
	"strings"
	"testing"

	"go.uber.org/zap"
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
	if b := strings.Join([]string{s.Version, s.SourceNamespaces, s.Compat, strings.Join(s.NotifyFormats, "")}, " "); strings.Contains(b, "s3cr3t") || strings.Contains(b, "hooks.example.com") {
		t.Errorf("settings hold the webhook URL: %+v", s)
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
	got, err := List(ctx, c, "")
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
	if got, _ := List(ctx, c, ""); len(got) != 0 {
		t.Errorf("List read a ConfigMap courier did not make: %+v", got)
	}
}
