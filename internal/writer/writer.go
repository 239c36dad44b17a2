// Package writer is the one writer of Secrets and ConfigMaps that the
// replicator and the guard share: create, update, patch (of an object that
// pulls, which stays its owner's) and delete with preconditions, every write
// under courier's field manager. It decides
// nothing; callers say what to write.
package writer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Writer writes Secrets and ConfigMaps.
type Writer struct {
	client kubernetes.Interface
}

// New is a Writer on client.
func New(client kubernetes.Interface) *Writer { return &Writer{client: client} }

var (
	createOpts = metav1.CreateOptions{FieldManager: wellknown.FieldManager}
	updateOpts = metav1.UpdateOptions{FieldManager: wellknown.FieldManager}
)

// Create creates obj, a *corev1.Secret or *corev1.ConfigMap.
func (w *Writer) Create(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		return w.client.CoreV1().Secrets(o.Namespace).Create(ctx, o, createOpts)
	case *corev1.ConfigMap:
		return w.client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, createOpts)
	}
	return nil, fmt.Errorf("courier writes Secrets and ConfigMaps only, not %T", obj)
}

// Update updates obj, a *corev1.Secret or *corev1.ConfigMap; its
// resourceVersion, when set, makes the update apply only to that version.
func (w *Writer) Update(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		return w.client.CoreV1().Secrets(o.Namespace).Update(ctx, o, updateOpts)
	case *corev1.ConfigMap:
		return w.client.CoreV1().ConfigMaps(o.Namespace).Update(ctx, o, updateOpts)
	}
	return nil, fmt.Errorf("courier writes Secrets and ConfigMaps only, not %T", obj)
}

// Patch applies a JSON patch to the object of kind (wellknown.KindSecret or
// KindConfigMap) namespace/name.
func (w *Writer) Patch(ctx context.Context, kind, namespace, name string, patch []byte) error {
	opts := metav1.PatchOptions{FieldManager: wellknown.FieldManager}
	var err error
	switch kind {
	case wellknown.KindSecret:
		_, err = w.client.CoreV1().Secrets(namespace).Patch(ctx, name, types.JSONPatchType, patch, opts)
	case wellknown.KindConfigMap:
		_, err = w.client.CoreV1().ConfigMaps(namespace).Patch(ctx, name, types.JSONPatchType, patch, opts)
	default:
		err = fmt.Errorf("courier patches Secrets and ConfigMaps only, not %s", kind)
	}
	return err
}

// Delete deletes the object of kind (wellknown.KindSecret or KindConfigMap)
// that m describes, only if it is still the one seen: same UID, same
// resourceVersion.
func (w *Writer) Delete(ctx context.Context, kind string, m metav1.Object) error {
	uid, rv := m.GetUID(), m.GetResourceVersion()
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}}
	switch kind {
	case wellknown.KindSecret:
		return w.client.CoreV1().Secrets(m.GetNamespace()).Delete(ctx, m.GetName(), opts)
	case wellknown.KindConfigMap:
		return w.client.CoreV1().ConfigMaps(m.GetNamespace()).Delete(ctx, m.GetName(), opts)
	}
	return fmt.Errorf("courier deletes Secrets and ConfigMaps only, not %s", kind)
}
