package informers

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/role"
)

// Without a metadata client (whole lists, as the tests' fake API servers
// serve), Secrets and ConfigMaps are listed only once the workloads are, so
// the transform knows what the workloads consume when it first holds each
// input: a consumed one is held as its digests, the others as their
// metadata only.
func TestSecretsAndConfigMapsAreListedAfterTheWorkloads(t *testing.T) {
	web := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", EnvFrom: []corev1.EnvFromSource{
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}}}}}}}
	client := fake.NewClientset(web,
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "db"}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "unused"}, Data: map[string][]byte{"k": []byte("v")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "settings"}, Data: map[string]string{"k": "v"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "settings"}, Data: map[string]string{"k": "v"}})
	s, err := New(client, nil, role.Config{Namespace: "courier"}, Scope{}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	var early atomic.Int32
	for _, resource := range []string{"secrets", "configmaps"} {
		client.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			for _, inf := range s.Workloads() {
				if !inf.HasSynced() {
					early.Add(1)
				}
			}
			return false, nil, nil
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer func() { cancel(); s.Shutdown() }()
	s.Start(ctx)
	if err := s.WaitForSync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := early.Load(); n > 0 {
		t.Errorf("Secrets or ConfigMaps were listed %d times before the workloads were", n)
	}
	for _, c := range []struct {
		getter   Getter
		key      string
		consumed bool
	}{
		{s.Secrets, "app/db", true},
		{s.Secrets, "app/unused", false},
		{s.ConfigMaps, "app/settings", true},
		{s.ConfigMaps, "other/settings", false},
	} {
		obj, ok, _ := c.getter.Informer().GetIndexer().GetByKey(c.key)
		if !ok {
			t.Fatalf("%s not cached", c.key)
		}
		if content.Read(obj) != c.consumed || len(content.Entries(obj)) > 0 != c.consumed {
			t.Errorf("%s: digests held %t, want %t (consumed)", c.key, content.Read(obj), c.consumed)
		}
	}
}
