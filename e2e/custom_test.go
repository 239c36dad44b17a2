package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// dynamicAdmin is an admin dynamic client, built once for the suite.
func dynamicAdmin(t *testing.T) dynamic.Interface {
	t.Helper()
	d, err := dynamicClient()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var dynamicClient = sync.OnceValues(func() (*dynamic.DynamicClient, error) { return dynamic.NewForConfig(env.cluster.Config) })

// createCRD creates a namespaced CRD group/plural (kind) served at v1 that
// keeps any fields, and waits until it is established; it is deleted when
// the test ends.
func createCRD(t *testing.T, group, plural, kind string) schema.GroupVersionResource {
	t.Helper()
	return createCRDWithSchema(t, group, plural, kind, map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

// createCRDWithSchema is createCRD with the given openAPIV3Schema.
func createCRDWithSchema(t *testing.T, group, plural, kind string, openAPIV3Schema map[string]any) schema.GroupVersionResource {
	t.Helper()
	name := plural + "." + group
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"group": group, "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": openAPIV3Schema}}},
		},
	}}
	crds := dynamicAdmin(t).Resource(crdResource)
	if _, err := crds.Create(t.Context(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create CRD %s: %v", name, err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	eventually(t, converge, "CRD "+name+" established", func(ctx context.Context) (bool, error) {
		u, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	return schema.GroupVersionResource{Group: group, Version: "v1", Resource: plural}
}

// testOperator stands in for the operator of a custom kind: it watches the
// kind and acts (counts) each time courier.dev/config-hash at path changes,
// as an operator that copies those annotations into its pods' template
// would roll them.
type testOperator struct {
	mu    sync.Mutex
	seen  map[string]string // object → the hash last acted on
	acted map[string]int
}

func startTestOperator(t *testing.T, gvr schema.GroupVersionResource, path ...string) *testOperator {
	t.Helper()
	op := &testOperator{seen: map[string]string{}, acted: map[string]int{}}
	inf := dynamicinformer.NewFilteredDynamicInformer(dynamicAdmin(t), gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	observe := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		hash, _, _ := unstructured.NestedString(u.Object, append(path, keyConfigHash)...)
		key := u.GetNamespace() + "/" + u.GetName()
		op.mu.Lock()
		defer op.mu.Unlock()
		if hash != op.seen[key] {
			op.seen[key] = hash
			op.acted[key]++
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, o any) { observe(o) }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(t.Context().Done(), inf.HasSynced) {
		t.Fatal("the test operator's cache did not sync")
	}
	return op
}

// rollouts is how many times the operator acted on ns/name for a hash
// courier wrote.
func (op *testOperator) rollouts(ns, name string) int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.acted[ns+"/"+name]
}

// createCustom creates a custom resource of kind with a spec of one replica.
func createCustom(t *testing.T, gvr schema.GroupVersionResource, kind, ns, name string, annotations map[string]string) {
	t.Helper()
	createObject(t, gvr, kind, ns, name, annotations, map[string]any{"replicas": int64(1)})
}

// createObject creates ns/name of kind (served as gvr) with annotations and spec.
func createObject(t *testing.T, gvr schema.GroupVersionResource, kind, ns, name string, annotations map[string]string, spec map[string]any) {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": gvr.GroupVersion().String(), "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec":     spec,
	}}
	u.SetAnnotations(annotations)
	if _, err := dynamicAdmin(t).Resource(gvr).Namespace(ns).Create(t.Context(), u, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create %s %s/%s: %v", kind, ns, name, err)
	}
}

func getCustom(ctx context.Context, t *testing.T, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return dynamicAdmin(t).Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// customBaselined waits for courier's baseline on a custom resource.
func customBaselined(t *testing.T, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	eventually(t, converge, "baseline on "+gvr.Resource+" "+ns+"/"+name, func(ctx context.Context) (bool, error) {
		u, err := getCustom(ctx, t, gvr, ns, name)
		return err == nil && u.GetAnnotations()[keyInputs] != "", err
	})
}

// reloadResourcesRBAC is the ClusterRole the chart renders for
// config.reloadResources=items, as rules.
func reloadResourcesRBAC(t *testing.T, items ...string) []rbacv1.PolicyRule {
	t.Helper()
	return reloadResourcesRules(t, "the chart", helmTemplate(t, "--set=config.reloadResources={"+strings.Join(items, ",")+"}"))
}

// reloadResourcesRules is the rules of ClusterRole courier-reload-resources
// among objs (rendered by what).
func reloadResourcesRules(t *testing.T, what string, objs map[string]map[string]any) []rbacv1.PolicyRule {
	t.Helper()
	return clusterRoleRules(t, what, objs, "courier-reload-resources")
}

// clusterRoleRules are the rules of ClusterRole name among objs (what
// rendered them).
func clusterRoleRules(t *testing.T, what string, objs map[string]map[string]any, name string) []rbacv1.PolicyRule {
	t.Helper()
	role, ok := objs["ClusterRole//"+name]
	if !ok {
		t.Fatalf("%s renders no ClusterRole %s", what, name)
	}
	var cr rbacv1.ClusterRole
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(role, &cr); err != nil {
		t.Fatal(err)
	}
	return cr.Rules
}

// identityWith is courier's identity with extra cluster rules, granted.
func identityWith(t *testing.T, sa string, extra []rbacv1.PolicyRule) identity {
	t.Helper()
	id := identity{sa: sa, rules: manifestRBAC{cluster: append(append([]rbacv1.PolicyRule{}, env.rbac.cluster...), extra...), leader: env.rbac.leader}}
	if err := id.grantCluster(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { id.revokeCluster(context.Background()) })
	return id
}

// SPEC (--reload-resources, custom resources): a custom resource of a
// listed kind, annotated courier.dev/reload-on, gets courier.dev/config-hash
// where its operator acts on it (a field path per kind, or its own
// annotations), reloaded-for and a Reloaded Event, once per change after the
// debounce; never on restart; a kind whose CRD appears after courier started
// is picked up, one whose CRD is deleted dropped; a field path the kind's
// schema prunes gives a Warning HashNotStored; only the listed kinds, with
// the chart's RBAC.
func TestCustomResourcesReloadThroughTheirOperator(t *testing.T) {
	group := testID() + ".e2e.courier.dev"
	items := []string{"widgets." + group + ":spec.template.metadata.annotations", "gadgets." + group, "stricts." + group + ":spec.pod.annotations"}
	id := identityWith(t, "courier-custom", reloadResourcesRBAC(t, items...))
	ns := newNamespace(t, "custom", nil)
	args := []string{"--source-namespaces=" + ns, "--reload-resources=" + strings.Join(items, ",")}
	c := startCourierAs(t, id, nil, args...)
	// Ready before the CRDs exist: nothing to watch yet.
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	// The CRD informer logs it from its handler, which may run just after
	// readiness: wait for the line rather than read the log once.
	eventually(t, converge, "a log line says a listed kind is not installed yet", func(context.Context) (bool, error) {
		return strings.Contains(c.Logs(), "is not installed; courier watches it once its CustomResourceDefinition is established"), nil
	})

	widgets := createCRD(t, group, "widgets", "Widget")
	gadgets := createCRD(t, group, "gadgets", "Gadget")
	// A structural schema without spec.pod: the API server prunes it.
	stricts := createCRDWithSchema(t, group, "stricts", "Strict", map[string]any{"type": "object", "properties": map[string]any{
		"spec": map[string]any{"type": "object", "properties": map[string]any{"replicas": map[string]any{"type": "integer"}}}}})
	eventually(t, converge, "courier watches the three kinds", func(context.Context) (bool, error) {
		return strings.Count(c.Logs(), "watching a custom kind") == 3, nil
	})
	widgetOp := startTestOperator(t, widgets, "spec", "template", "metadata", "annotations")
	gadgetOp := startTestOperator(t, gadgets, "metadata", "annotations")

	createSecret(t, ns, "db", withData("password", "1"))
	createConfigMap(t, ns, "cfg", nil, map[string]string{"mode": "a"})
	createCustom(t, widgets, "Widget", ns, "w", map[string]string{keyReloadOn: "secret/db"})
	createCustom(t, gadgets, "Gadget", ns, "g", map[string]string{keyReloadOn: "configmap/cfg, secret/db"})
	createCustom(t, widgets, "Widget", ns, "bystander", nil)
	createCustom(t, stricts, "Strict", ns, "s", map[string]string{keyReloadOn: "secret/db"})
	customBaselined(t, widgets, ns, "w")
	customBaselined(t, gadgets, ns, "g")
	customBaselined(t, stricts, ns, "s")
	strictBefore, err := getCustom(t.Context(), t, stricts, ns, "s")
	if err != nil {
		t.Fatal(err)
	}

	// Two changes within the debounce: one rollout each.
	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Data["password"] = []byte("2") })
	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Data["password"] = []byte("3") })
	eventually(t, 10*converge/5, "both operators acted", func(context.Context) (bool, error) {
		return widgetOp.rollouts(ns, "w") == 1 && gadgetOp.rollouts(ns, "g") == 1, nil
	})
	consistently(t, quiet, "each acted exactly once", func(context.Context) (bool, error) {
		return widgetOp.rollouts(ns, "w") == 1 && gadgetOp.rollouts(ns, "g") == 1, nil
	})
	w, err := getCustom(t.Context(), t, widgets, ns, "w")
	if err != nil {
		t.Fatal(err)
	}
	if h, _, _ := unstructured.NestedString(w.Object, "spec", "template", "metadata", "annotations", keyConfigHash); len(h) != 64 {
		t.Errorf("widget spec.template.metadata.annotations %s = %q, want a sha256", keyConfigHash, h)
	}
	if _, ok := w.GetAnnotations()[keyConfigHash]; ok {
		t.Error("the widget's own annotations got the hash; its kind's field path says where it goes")
	}
	if got := w.GetAnnotations()[keyReloadedFor]; got != "secret/db" {
		t.Errorf("widget %s = %q, want secret/db", keyReloadedFor, got)
	}
	g, err := getCustom(t.Context(), t, gadgets, ns, "g")
	if err != nil {
		t.Fatal(err)
	}
	if len(g.GetAnnotations()[keyConfigHash]) != 64 {
		t.Errorf("gadget annotations %v: want a sha256 %s (the default place)", g.GetAnnotations(), keyConfigHash)
	}
	eventually(t, converge, "Reloaded Event on the widget", eventWith(ns, "w", "Reloaded", "secret/db"))
	eventually(t, converge, "HashNotStored Event on the strict one", eventWith(ns, "s", "HashNotStored", "spec.pod.annotations", "field path"))
	if n := eventCount(t, ns, "s", "Reloaded"); n != 0 {
		t.Errorf("%d Reloaded Events on an object whose hash was pruned", n)
	}
	// Nothing else written: the change stays pending.
	if sNow, err := getCustom(t.Context(), t, stricts, ns, "s"); err != nil ||
		sNow.GetAnnotations()[keyInputs] != strictBefore.GetAnnotations()[keyInputs] || sNow.GetAnnotations()[keyReloadedFor] != "" {
		t.Errorf("the pruned object's record moved: %v (%v)", sNow.GetAnnotations(), err)
	}
	if b, err := getCustom(t.Context(), t, widgets, ns, "bystander"); err != nil || len(b.GetAnnotations()) != 0 {
		t.Errorf("a widget without reload-on got annotations %v (%v)", b.GetAnnotations(), err)
	}

	// Only what an object names: the ConfigMap reloads the gadget alone.
	updateConfigMap(t, ns, "cfg", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "b" })
	eventually(t, 2*converge, "the gadget's operator acted again", func(context.Context) (bool, error) {
		return gadgetOp.rollouts(ns, "g") == 2, nil
	})
	consistently(t, quiet, "the widget did not", func(context.Context) (bool, error) {
		return widgetOp.rollouts(ns, "w") == 1 && gadgetOp.rollouts(ns, "g") == 2, nil
	})

	// A restart rolls nothing out; a change while down rolls out once.
	firstLog := c.Logs()
	c.Stop()
	updateSecret(t, ns, "db", func(s *corev1.Secret) { s.Data["password"] = []byte("4") })
	c = startCourierAs(t, id, nil, append(args, "--namespace="+c.namespace)...)
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	eventually(t, 2*converge, "the change made while down reached each operator once", func(context.Context) (bool, error) {
		return widgetOp.rollouts(ns, "w") == 2 && gadgetOp.rollouts(ns, "g") == 3, nil
	})
	consistently(t, quiet, "and only once", func(context.Context) (bool, error) {
		return widgetOp.rollouts(ns, "w") == 2 && gadgetOp.rollouts(ns, "g") == 3, nil
	})
	if strings.Contains(firstLog+c.Logs(), "is forbidden") {
		t.Error("the API server refused courier something with the chart's RBAC")
	}

	// A CRD deleted: courier stops watching its kind.
	if err := dynamicAdmin(t).Resource(crdResource).Delete(t.Context(), gadgets.Resource+"."+group, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "courier stops watching the deleted kind", func(context.Context) (bool, error) {
		return strings.Contains(c.Logs(), "stopped watching a custom kind"), nil
	})
}

// SPEC (--reload-resources, RBAC): what the chart grants for a custom kind
// is all used: without any one permission, courier's log shows the API
// server refusing exactly it (see TestRBACIsMinimal).
func TestReloadResourcesRBACIsMinimal(t *testing.T) {
	group := testID() + ".e2e.courier.dev"
	item := "widgets." + group
	widgets := createCRD(t, group, "widgets", "Widget")
	eachPermissionUsed(t, permissions(reloadResourcesRBAC(t, item), false), item, func(t *testing.T, ns string, i int) {
		createCustom(t, widgets, "Widget", ns, fmt.Sprintf("w%d", i), map[string]string{keyReloadOn: "secret/db"})
	})
}

// eachPermissionUsed runs courier with --reload-resources=item and courier's
// RBAC plus extra (the rules for item: list and watch of its CRD, list,
// watch and patch of the kind) minus one permission at a time, and waits
// for courier's log to show the API server refusing it that permission.
// create makes an object of the kind to baseline in ns, which holds Secret
// db: courier's first write to it is a patch.
func eachPermissionUsed(t *testing.T, extra []permission, item string, create func(t *testing.T, ns string, i int)) {
	t.Helper()
	if len(extra) != 5 {
		t.Fatalf("%s is granted %v; want list and watch of its CRD and list, watch and patch of the kind", item, extra)
	}
	ns := newNamespace(t, "custom-rbac", nil)
	createSecret(t, ns, "db", withData("password", "1"))
	for i, p := range extra {
		t.Run(p.String(), func(t *testing.T) {
			rules := rulesWithout(extra, p)
			var envs []string
			if p.verb == "list" {
				envs = []string{"KUBE_FEATURE_WatchListClient=false"}
			}
			c := startCourierAs(t, identityWith(t, fmt.Sprintf("courier-custom-minus-%d", i), rules), envs, "--source-namespaces="+ns, "--reload-resources="+item)
			create(t, ns, i)
			eventually(t, 3*converge, "courier's log shows the refusal of "+p.String(), func(context.Context) (bool, error) {
				return strings.Contains(c.Logs(), refusal(p)), nil
			})
		})
	}
}
