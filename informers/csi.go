package informers

import (
	"context"
	"sync"

	"go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// ProviderStatuses is the Secrets Store CSI driver's
// SecretProviderClassPodStatus: one per pod and mounted volume, naming the
// SecretProviderClass and the version of each object the driver mounted.
var ProviderStatuses = schema.GroupVersionResource{Group: "secrets-store.csi.x-k8s.io", Version: "v1", Resource: "secretproviderclasspodstatuses"}

// ByProviderClass indexes SecretProviderClassPodStatus objects by
// "<namespace>/<status.secretProviderClassName>".
const ByProviderClass = "courier.dev/by-provider-class"

// NewProviderStatuses builds the informer of SecretProviderClassPodStatus
// objects (--reload-csi), not started. The cache keeps of each only its
// name, namespace, UID, resourceVersion and status (class, pod, objects).
// It watches scope's namespaces. Nothing waits for it to sync: the driver's CRDs may not be installed,
// which is logged with the fix, as a missing permission is. Its HasSynced
// (which the reloader asks before it trusts a class's reports) leaves out
// the namespaces reach refuses, so one missing namespace holds no CSI
// reload up elsewhere.
func NewProviderStatuses(dyn dynamic.Interface, scope Scope, reach *Reach, logger *zap.Logger) (cache.SharedIndexInformer, error) {
	inf := perNamespace(scope, func(ns string) cache.SharedIndexInformer {
		return informerOf(dyn.Resource(ProviderStatuses).Namespace(ns), dyn, &unstructured.Unstructured{}, ProviderStatuses.String(), nil, cache.Indexers{})
	})
	if m, ok := inf.(*Multi); ok {
		m.skip = reach.Refused
	}
	if err := inf.AddIndexers(cache.Indexers{ByProviderClass: indexByProviderClass}); err != nil {
		return nil, err
	}
	_ = inf.SetTransform(trimProviderStatus)
	var mu sync.Mutex
	said := map[string]bool{} // each kind of failure once
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		msg := ""
		switch {
		case apierrors.IsNotFound(err):
			msg = "SecretProviderClassPodStatus (secrets-store.csi.x-k8s.io/v1) is not served: install the Secrets Store CSI driver's CRDs; until then --reload-csi reloads nothing for CSI volumes"
		case apierrors.IsForbidden(err):
			msg = "courier may not list or watch secretproviderclasspodstatuses (secrets-store.csi.x-k8s.io): grant list and watch on them (the chart's config.reloadCSI, or manifests/secrets-store-csi); until then --reload-csi reloads nothing for CSI volumes"
		}
		if msg != "" {
			mu.Lock()
			first := !said[msg]
			said[msg] = true
			mu.Unlock()
			if first {
				logger.Error(msg, zap.Error(err))
			}
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	return inf, nil
}

// ProviderClassOf is the SecretProviderClass a cached
// SecretProviderClassPodStatus reports on, and its namespace.
func ProviderClassOf(obj any) (namespace, class string, ok bool) {
	u, isU := Unwrap(obj).(*unstructured.Unstructured)
	if !isU {
		return "", "", false
	}
	class, _, _ = unstructured.NestedString(u.Object, "status", "secretProviderClassName")
	return u.GetNamespace(), class, class != ""
}

func indexByProviderClass(obj any) ([]string, error) {
	if ns, class, ok := ProviderClassOf(obj); ok {
		return []string{ns + "/" + class}, nil
	}
	return nil, nil
}

// trimProviderStatus keeps what the reloader reads of a
// SecretProviderClassPodStatus.
func trimProviderStatus(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(),
		"metadata": map[string]any{
			"name": u.GetName(), "namespace": u.GetNamespace(), "uid": string(u.GetUID()), "resourceVersion": u.GetResourceVersion(),
		},
	}}
	status := map[string]any{}
	for _, field := range []string{"secretProviderClassName", "podName", "objects"} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "status", field); ok {
			status[field] = v
		}
	}
	out.Object["status"] = status
	return out, nil
}
