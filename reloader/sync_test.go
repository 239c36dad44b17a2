package reloader

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

func TestDiff(t *testing.T) {
	before := baseline{"secret/a": "1", "secret/b": "1", "configmap/c": "1"}
	now := baseline{"secret/a": "2", "secret/b": "1", "secret/new": "1"}
	changed, missing, appeared := diff(before, now)
	if diff := cmp.Diff([]string{"secret/a"}, changed); diff != "" {
		t.Errorf("changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"configmap/c"}, missing); diff != "" {
		t.Errorf("missing (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"secret/new"}, appeared); diff != "" {
		t.Errorf("appeared (-want +got):\n%s", diff)
	}
}

func TestBaselineRoundTrip(t *testing.T) {
	b := baseline{"secret/b": "2222", "configmap/a": "1111"}
	if got, want := b.String(), "configmap/a=1111,secret/b=2222"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	got, st := parseBaseline(b.encode("k1", "team-a"))
	if diff := cmp.Diff(b, got); diff != "" || st != (stored{keyID: "k1", installation: "team-a"}) {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if got, _ := parseBaseline("garbage,,secret/x=,=1"); len(got) != 0 {
		t.Errorf("unreadable entries kept: %v", got)
	}
}

func TestConsumedDigestOnlySeesConsumedKeys(t *testing.T) {
	entries := func(a, b string) []content.Entry {
		return []content.Entry{{Key: "a", Digest: content.Digest([]byte(a))}, {Key: "b", Digest: content.Digest([]byte(b))}}
	}
	onlyA := inputs.Ref{Kind: wellknown.KindSecret, Name: "s", Keys: []string{"a"}}
	whole := inputs.Ref{Kind: wellknown.KindSecret, Name: "s"}
	if (digester{}).consumedDigest(onlyA, entries("1", "1")) != (digester{}).consumedDigest(onlyA, entries("1", "2")) {
		t.Errorf("a change to key b changed the digest of a keyRef to a")
	}
	if (digester{}).consumedDigest(onlyA, entries("1", "1")) == (digester{}).consumedDigest(onlyA, entries("2", "1")) {
		t.Errorf("a change to key a did not change the digest")
	}
	if (digester{}).consumedDigest(whole, entries("1", "1")) == (digester{}).consumedDigest(whole, entries("1", "2")) {
		t.Errorf("a whole-object consumer did not see key b change")
	}
	many := &corev1.ConfigMap{Data: map[string]string{"a": "1"}}
	for i := range content.MaxKeyDigests {
		many.Data[fmt.Sprintf("k%d", i)] = ""
	}
	before := content.DigestObject(many.DeepCopy(), true)
	many.Data["a"] = "2"
	if (digester{}).consumedDigest(onlyA, content.Entries(before)) == (digester{}).consumedDigest(onlyA, content.Entries(content.DigestObject(many, true))) {
		t.Errorf("a change to key a of an object held as one digest did not change the digest of a keyRef to a")
	}
	if got := len((digester{}).consumedDigest(whole, nil)); got != digestLen {
		t.Errorf("digest length %d, want %d", got, digestLen)
	}
}

func TestPatchTouchesOnlyCourierAnnotations(t *testing.T) {
	tests := []struct {
		kind, hash string
		path       []string
		want       string
	}{
		{workload.Deployment, "", workload.HashPath(workload.Deployment), `{"metadata":{"annotations":{"courier.dev/config-inputs":"secret/a=1"},"resourceVersion":"7"}}`},
		{workload.Deployment, "h", workload.HashPath(workload.Deployment), `{"metadata":{"annotations":{"courier.dev/config-inputs":"secret/a=1"},"resourceVersion":"7"},"spec":{"template":{"metadata":{"annotations":{"courier.dev/config-hash":"h"}}}}}`},
		{workload.CronJob, "h", workload.HashPath(workload.CronJob), `{"metadata":{"annotations":{"courier.dev/config-inputs":"secret/a=1"},"resourceVersion":"7"},"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"annotations":{"courier.dev/config-hash":"h"}}}}}}}`},
		// A custom kind's default: its own annotations, beside the baseline.
		{"HarborCluster", "h", []string{"metadata", "annotations"}, `{"metadata":{"annotations":{"courier.dev/config-inputs":"secret/a=1","courier.dev/config-hash":"h"},"resourceVersion":"7"}}`},
		{"WidgetWithPath", "h", []string{"spec", "podAnnotations"}, `{"metadata":{"annotations":{"courier.dev/config-inputs":"secret/a=1"},"resourceVersion":"7"},"spec":{"podAnnotations":{"courier.dev/config-hash":"h"}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.kind+tt.hash, func(t *testing.T) {
			got, err := patch(tt.path, "7", map[string]any{wellknown.ConfigInputs: "secret/a=1"}, tt.hash)
			if err != nil {
				t.Fatal(err)
			}
			var g, w any
			_ = json.Unmarshal(got, &g)
			_ = json.Unmarshal([]byte(tt.want), &w)
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeyedDigestsDifferFromUnkeyedAndBetweenKeys(t *testing.T) {
	ref := inputs.Ref{Kind: wellknown.KindSecret, Name: "s"}
	entries := []content.Entry{{Key: "password", Digest: content.Digest([]byte("hunter2"))}}
	unkeyed := (digester{}).consumedDigest(ref, entries)
	if unkeyed != content.Hash(entries)[:digestLen] {
		t.Fatalf("the unkeyed digest %s is not the one baselines were written with", unkeyed)
	}
	a, b := newDigester(make([]byte, 32)), newDigester(append(make([]byte, 31), 1))
	if a.consumedDigest(ref, entries) == unkeyed || a.consumedDigest(ref, entries) == b.consumedDigest(ref, entries) {
		t.Error("keyed digests do not depend on the key")
	}
	if a.id == b.id || a.id == "" {
		t.Errorf("key ids %q and %q", a.id, b.id)
	}
	if a.configHash(baseline{"secret/s": "1"}) == (digester{}).configHash(baseline{"secret/s": "1"}) {
		t.Error("the keyed config hash equals the unkeyed one")
	}
}

func TestWithOptInsTakesTheRolloutsWordFirst(t *testing.T) {
	rollout := map[string]string{wellknown.Reload: "false", wellknown.ConfigInputs: "secret/a=1"}
	deployment := map[string]string{wellknown.Reload: "true", wellknown.ReloadOn: "secret/b", wellknown.ConfigInputs: "secret/z=9", "other": "x"}
	got := withOptIns(rollout, deployment)
	want := map[string]string{wellknown.Reload: "false", wellknown.ReloadOn: "secret/b", wellknown.ConfigInputs: "secret/a=1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if rollout[wellknown.ReloadOn] != "" {
		t.Error("withOptIns changed the Rollout's own map")
	}
	if got := withOptIns(nil, map[string]string{wellknown.Reload: "true"}); got[wellknown.Reload] != "true" {
		t.Errorf("a Rollout without annotations does not take the Deployment's opt-in: %v", got)
	}
}
