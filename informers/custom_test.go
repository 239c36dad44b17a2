package informers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/workload"
)

func crd(name, kind string, established bool, versions ...map[string]any) *unstructured.Unstructured {
	var vs []any
	for _, v := range versions {
		vs = append(vs, map[string]any{"name": v["name"], "served": v["served"], "storage": v["storage"],
			"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "description": strings.Repeat("x", 1000)}}})
	}
	status := "False"
	if established {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"names": map[string]any{"kind": kind, "plural": strings.Split(name, ".")[0]}, "versions": vs},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "Established", "status": status}}},
	}}
}

func version(name string, served, storage bool) map[string]any {
	return map[string]any{"name": name, "served": served, "storage": storage}
}

func TestServedKindReadsTheTrimmedCRD(t *testing.T) {
	var rs workload.Resources
	if err := rs.Set("widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name    string
		crd     *unstructured.Unstructured
		version string // "": not served
	}{
		{"storage version served", crd("widgets.example.com", "Widget", true, version("v1alpha1", true, false), version("v1", true, true)), "v1"},
		{"storage version not served", crd("widgets.example.com", "Widget", true, version("v2", false, true), version("v1", true, false)), "v1"},
		{"not established", crd("widgets.example.com", "Widget", false, version("v1", true, true)), ""},
		{"nothing served", crd("widgets.example.com", "Widget", true, version("v1", false, true)), ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			trimmed, err := trimCRD(tt.crd)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(toString(trimmed), "xxxx") {
				t.Error("the trimmed CRD still holds its schema")
			}
			got, ok := servedKind(rs[0], trimmed)
			if ok != (tt.version != "") || got.Version != tt.version || (ok && got.Name() != "Widget.example.com") {
				t.Errorf("servedKind = %+v, %v; want version %q", got, ok, tt.version)
			}
		})
	}
	if _, ok := servedKind(rs[0], nil); ok {
		t.Error("a deleted CRD serves its kind")
	}
}

func toString(obj any) string {
	b, _ := obj.(*unstructured.Unstructured).MarshalJSON()
	return string(b)
}

func TestObjectTransformNeverFailsOnWhatItCannotRead(t *testing.T) {
	var rs workload.Resources
	if err := rs.Set("rollouts.argoproj.io"); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.WarnLevel)
	c := &Custom{logger: zap.New(core)}
	transform := c.objectTransform(workload.Rollouts, workload.Custom{Resource: rs[0], Version: "v1alpha1", Kind: "Rollout"})
	bad := &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "r", "namespace": "n"},
		"spec":     map[string]any{"workloadRef": map[string]any{"kind": "PodTemplate", "name": "t"}},
	}}
	out, err := transform(bad)
	if err != nil {
		t.Fatalf("the transform failed (the reflector would stop): %v", err)
	}
	if o, ok := out.(*workload.Object); !ok || workload.Inputs(o) != nil {
		t.Errorf("transform = %#v; want an Object with no inputs", out)
	}
	if logs.FilterMessage("a custom resource courier cannot read").Len() != 1 {
		t.Error("no warning names the Rollout courier cannot read")
	}
	again, err := transform(out)
	if err != nil || again != out {
		t.Error("the transform is not idempotent")
	}
}

// TestCustomFollowsItsCRD drives the lifecycle through a fake dynamic
// client: a kind not installed is logged; its CRD established starts an
// informer and tells the handler; a new storage version restarts it; the
// CRD deleted stops it.
func TestCustomFollowsItsCRD(t *testing.T) {
	var rs workload.Resources
	if err := rs.Set("widgets.example.com"); err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdGVR: "CustomResourceDefinitionList",
		{Group: "example.com", Version: "v1", Resource: "widgets"}: "WidgetList",
		{Group: "example.com", Version: "v2", Resource: "widgets"}: "WidgetList",
	})
	core, logs := observer.New(zap.InfoLevel)
	c, err := NewCustom(client, rs, Scope{}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var events []string
	c.OnKind(func(k workload.Custom, inf cache.SharedIndexInformer) (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, "start "+k.Name()+" "+k.Version)
		return func() {
			mu.Lock()
			defer mu.Unlock()
			events = append(events, "stop "+k.Version)
		}, nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Shutdown() }()
	c.Start(ctx)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		within5s(ctx, t, cond, func() string {
			mu.Lock()
			defer mu.Unlock()
			return fmt.Sprintf("%s (events %v)", what, events)
		})
	}
	waitFor("synced with nothing installed", c.HasSynced)
	waitFor("logged as not installed", func() bool { return logs.FilterMessageSnippet("is not installed").Len() == 1 })

	crds := client.Resource(crdGVR)
	if _, err := crds.Create(ctx, crd("widgets.example.com", "Widget", true, version("v1", true, true)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	seen := func(want ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return strings.Join(events, "; ") == strings.Join(want, "; ")
		}
	}
	waitFor("started", seen("start Widget.example.com v1"))
	waitFor("synced with the kind running", c.HasSynced)
	if _, err := crds.Update(ctx, crd("widgets.example.com", "Widget", true, version("v1", true, false), version("v2", true, true)), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("restarted at v2", seen("start Widget.example.com v1", "stop v1", "start Widget.example.com v2"))
	if err := crds.Delete(ctx, "widgets.example.com", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("stopped", seen("start Widget.example.com v1", "stop v1", "start Widget.example.com v2", "stop v2"))
}

// TestWarnedObjectsAreForgottenWithThem: what is remembered of an object
// courier cannot read lives as long as the object, so a tenant creating and
// deleting such objects grows nothing.
func TestWarnedObjectsAreForgottenWithThem(t *testing.T) {
	var rs workload.Resources
	if err := rs.Set("widgets.example.com:spec.template"); err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	widgets := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		crdGVR: "CustomResourceDefinitionList", widgets: "WidgetList",
	})
	core, logs := observer.New(zap.InfoLevel)
	c, err := NewCustom(client, rs, Scope{}, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	c.OnKind(func(workload.Custom, cache.SharedIndexInformer) (func(), error) { return func() {}, nil })
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Shutdown() }()
	c.Start(ctx)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		within5s(ctx, t, cond, func() string { return what })
	}
	if _, err := client.Resource(crdGVR).Create(ctx, crd("widgets.example.com", "Widget", true, version("v1", true, true)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor("the kind synced", c.HasSynced)
	for i := range 20 {
		w := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
			"metadata": map[string]any{"name": fmt.Sprintf("w%d", i), "namespace": "team", "uid": fmt.Sprintf("uid-%d", i)},
			"spec":     map[string]any{"template": "not a map"}}}
		if _, err := client.Resource(widgets).Namespace("team").Create(ctx, w, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("20 warned of", func() bool {
		return c.warnedCount() == 20 && logs.FilterMessage("a custom resource courier cannot read").Len() == 20
	})
	for i := range 20 {
		if err := client.Resource(widgets).Namespace("team").Delete(ctx, fmt.Sprintf("w%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor("none remembered once they are gone", func() bool { return c.warnedCount() == 0 })
}

// within5s fails t, saying what, unless cond holds within 5 s.
func within5s(ctx context.Context, t *testing.T, cond func() bool, what func() string) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("%s: not within 5s", what())
	}
}
