package informers

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/courier-k8s/courier/internal/heap"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// BenchmarkCacheCost reports the Go heap one object costs in courier's
// informer caches (B/object): each object is decoded from protobuf as the
// API server sends it, transformed and added to a store with courier's
// indexes, and the live heap is measured before and after. `make bench-scale`
// measures the same thing on a real cluster (heap in use ÷ cached objects);
// this shows which kind costs what, in seconds, with the bench's shape (10
// Secrets, 5 ConfigMaps, 2 Deployments and 3 replicas per namespace).
// COST_PROFILE=<prefix> writes a heap profile of each kind's store (every
// allocation sampled) for `go tool pprof -sample_index=inuse_space`.
func BenchmarkCacheCost(b *testing.B) {
	allowed := func(ns string) bool { return ns == "platform" }
	content := ContentIndexers(role.Config{Allowed: allowed, Namespace: "courier-system"})
	workloads := cache.Indexers{ConsumersByInput: indexConsumersByInput}
	namespaces := cache.Indexers{}
	for _, c := range []struct {
		name     string
		indexers cache.Indexers
		object   func(i int) kruntime.Object
		// consumed: a workload consumes every object (held as digests),
		// else none (held as metadata only).
		consumed bool
	}{
		{name: "Secret", indexers: content, object: func(i int) kruntime.Object {
			return &corev1.Secret{ObjectMeta: apiMeta(fmt.Sprintf("sec-%d", i%10), nsOf(i/10)), Data: map[string][]byte{"v": random(4096)}}
		}},
		{name: "consumed Secret", indexers: content, consumed: true, object: func(i int) kruntime.Object {
			return &corev1.Secret{ObjectMeta: apiMeta(fmt.Sprintf("sec-%d", i%10), nsOf(i/10)), Data: map[string][]byte{"v": random(4096)}}
		}},
		{name: "ConfigMap", indexers: content, object: func(i int) kruntime.Object {
			return &corev1.ConfigMap{ObjectMeta: apiMeta(fmt.Sprintf("cm-%d", i%5), nsOf(i/5)), Data: map[string]string{"v": string(random(4096))}}
		}},
		{name: "replica Secret", indexers: content, object: func(i int) kruntime.Object {
			// Three sources, each in every namespace: a source's replicas
			// carry its content's hash.
			src := []string{"shared", "registry", "ca"}[i%3]
			m := apiMeta(src, nsOf(i/3))
			m.Labels = map[string]string{wellknown.ManagedBy: wellknown.ManagedByValue, wellknown.Replica: "true"}
			m.Annotations = map[string]string{wellknown.Source: "platform/" + src, wellknown.ContentHash: fmt.Sprintf("%x", sha256.Sum256([]byte(src))), wellknown.Installation: "courier-system/courier"}
			return &corev1.Secret{ObjectMeta: m, Data: map[string][]byte{"token": random(4096)}}
		}},
		{name: "Namespace", indexers: namespaces, object: func(i int) kruntime.Object {
			m := apiMeta(nsOf(i), "")
			m.Labels = map[string]string{wellknown.NamespaceName: nsOf(i), "team": fmt.Sprintf("t%d", i%10), "tier": "prod"}
			return &corev1.Namespace{ObjectMeta: m, Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}
		}},
		{name: "Deployment", indexers: workloads, object: func(i int) kruntime.Object {
			m := apiMeta(fmt.Sprintf("app-%d", i%2), nsOf(i/2))
			m.Annotations = map[string]string{"deployment.kubernetes.io/revision": "1", wellknown.ConfigInputs: fmt.Sprintf("%x", random(32))}
			labels := map[string]string{"app": m.Name}
			return &appsv1.Deployment{ObjectMeta: m, Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{wellknown.ConfigHash: fmt.Sprintf("%x", random(32))}},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1.2.3",
						Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}, {Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
							LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}, Key: "token"}}}},
						EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-1"}}}}}},
						Volumes: []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec-1"}}}}}}}}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			const n = 20000
			encoded := make([][]byte, n)
			for i := range n {
				encoded[i] = encode(b, c.object(i))
			}
			if os.Getenv("COST_PROFILE") != "" {
				runtime.MemProfileRate = 1
			}
			var consumed Consumed
			if c.consumed {
				consumed = func(string, string, string) bool { return true }
			}
			transform := Transform(SourcesIn(role.Config{Allowed: allowed, Namespace: "courier-system"}), consumed)
			codec := protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
			for b.Loop() {
				before := heap.Live()
				store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, c.indexers)
				for _, raw := range encoded {
					obj, _, err := codec.Decode(raw, nil, nil)
					if err != nil {
						b.Fatal(err)
					}
					t, err := transform(obj)
					if err != nil {
						b.Fatal(err)
					}
					if err := store.Add(t); err != nil {
						b.Fatal(err)
					}
				}
				after := heap.Live()
				if f := os.Getenv("COST_PROFILE"); f != "" {
					w, _ := os.Create(f + "-" + strings.ReplaceAll(c.name, " ", "_"))
					_ = pprof.WriteHeapProfile(w)
					w.Close()
				}
				runtime.KeepAlive(store)
				b.ReportMetric(float64(after-before)/n, "B/object")
			}
		})
	}
}

func nsOf(i int) string { return fmt.Sprintf("team-%05d", i) }

// apiMeta is metadata as the API server returns it: a UID, a resource
// version, a creation time and one managed-fields entry.
func apiMeta(name, namespace string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID(fmt.Sprintf("%x-%x-%x-%x-%x", random(4), random(2), random(2), random(2), random(6))),
		ResourceVersion: fmt.Sprint(1000000 + len(name)*7919), CreationTimestamp: metav1.Now(),
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:data":{".":{},"f:v":{}},"f:metadata":{"f:labels":{}}}`)}}}
}

func random(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func encode(b *testing.B, obj kruntime.Object) []byte {
	b.Helper()
	gvks, _, err := scheme.Scheme.ObjectKinds(obj)
	if err != nil {
		b.Fatal(err)
	}
	obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	raw, err := kruntime.Encode(protobuf.NewSerializer(scheme.Scheme, scheme.Scheme), obj)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}
