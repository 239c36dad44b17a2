// Package writer is the one writer of Secrets and ConfigMaps that the
// replicator and the guard share: create, update, patch (of an object that
// pulls, which stays its owner's) and delete with preconditions, every write
// under courier's field manager. It decides
// nothing; callers say what to write.
package writer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clientmetrics "k8s.io/client-go/tools/metrics"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Writer writes Secrets and ConfigMaps.
type Writer struct {
	client      kubernetes.Interface
	scopeLabels []string
}

// New is a Writer on client. scopeLabels are the label keys of
// --resource-label-selector (none without it): see Create.
func New(client kubernetes.Interface, scopeLabels []string) *Writer {
	return &Writer{client: client, scopeLabels: scopeLabels}
}

var (
	createOpts = metav1.CreateOptions{FieldManager: wellknown.FieldManager}
	updateOpts = metav1.UpdateOptions{FieldManager: wellknown.FieldManager}
)

// Create creates obj, a *corev1.Secret or *corev1.ConfigMap. The API
// server's answer (the object, values included) is read and dropped, never
// decoded: see send.
//
// With --resource-label-selector, an object of that name that courier
// created (a replica, backup or digest key written before the selector was
// set, or relabelled since) is outside courier's view, so courier would try
// to create it forever: Create then adopts it instead, giving it obj's
// values of the selector's keys with a patch that applies only while it
// carries obj's courier labels, installation and source (adopt). The
// object, now in view, is then synced as any other.
func (w *Writer) Create(ctx context.Context, obj runtime.Object) error {
	err := w.send(ctx, obj, false)
	if apierrors.IsAlreadyExists(err) && len(w.scopeLabels) > 0 && w.adopt(ctx, obj) == nil {
		return nil
	}
	return err
}

// CreateAndGet creates obj as Create does, without adopting, and returns
// the object the API server created.
func (w *Writer) CreateAndGet(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
	return w.typed(ctx, obj, false)
}

// adopt patches the existing object of obj's name with obj's values of
// the scope labels, testing first that it carries obj's courier labels
// (managed-by courier, and its replica, backup or digest-key label),
// installation, and the source it is the replica or backup of.
func (w *Writer) adopt(ctx context.Context, obj runtime.Object) error {
	m, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	labels, annotations := m.GetLabels(), m.GetAnnotations()
	if labels[wellknown.ManagedBy] != wellknown.ManagedByValue {
		return errors.New("not an object courier creates") // a restored source stays its owner's
	}
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value string `json:"value"`
	}
	var ops []op
	for _, k := range []string{wellknown.ManagedBy, wellknown.Replica, wellknown.Backup, wellknown.DigestKey} {
		if v, ok := labels[k]; ok {
			ops = append(ops, op{"test", "/metadata/labels/" + JSONPointer(k), v})
		}
	}
	// Whose it is: another source's replica (or another installation's
	// object) stays its own; the older source wins.
	for _, k := range []string{wellknown.Installation, wellknown.Source, wellknown.BackupOf} {
		if v, ok := annotations[k]; ok {
			ops = append(ops, op{"test", "/metadata/annotations/" + JSONPointer(k), v})
		}
	}
	tests := len(ops)
	for _, k := range w.scopeLabels {
		if v, ok := labels[k]; ok {
			ops = append(ops, op{"add", "/metadata/labels/" + JSONPointer(k), v})
		}
	}
	if len(ops) == tests {
		return errors.New("no label of the selector to give it")
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	kind := wellknown.KindSecret
	if _, ok := obj.(*corev1.ConfigMap); ok {
		kind = wellknown.KindConfigMap
	}
	return w.Patch(ctx, kind, m.GetNamespace(), m.GetName(), patch)
}

// JSONPointer is key escaped as one JSON Pointer token (RFC 6901).
func JSONPointer(key string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(key) }

// Update updates obj, a *corev1.Secret or *corev1.ConfigMap; its
// resourceVersion, when set, makes the update apply only to that version.
// The answer is dropped, as Create's.
func (w *Writer) Update(ctx context.Context, obj runtime.Object) error {
	return w.send(ctx, obj, true)
}

// send creates (or, with update, updates) obj, a *corev1.Secret or
// *corev1.ConfigMap, and reads the API server's answer without decoding
// it: nothing courier writes this way uses it, and decoding the object
// written (its values, its managed fields) was the largest allocation of
// a first start that writes a replica into every namespace (#51). An
// error answer is decoded as the typed clients decode it.
func (w *Writer) send(ctx context.Context, obj runtime.Object, update bool) error {
	var resource string
	var m metav1.Object
	switch o := obj.(type) {
	case *corev1.Secret:
		resource, m = "secrets", o
	case *corev1.ConfigMap:
		resource, m = "configmaps", o
	default:
		return fmt.Errorf("courier writes Secrets and ConfigMaps only, not %T", obj)
	}
	rc, _ := w.client.CoreV1().RESTClient().(*rest.RESTClient)
	if rc == nil { // a fake clientset (unit tests) has none: its typed client
		_, err := w.typed(ctx, obj, update)
		return err
	}
	verb, req, params := "POST", rc.Post(), runtime.Object(&createOpts)
	if update {
		verb, req, params = "PUT", rc.Put().Name(m.GetName()), &updateOpts
	}
	// Protobuf as the typed clients speak it to a cluster whose client
	// sets no content type (another cluster's: informers/remote.go).
	req = req.UseProtobufAsDefault().Namespace(m.GetNamespace()).Resource(resource).VersionedParams(params, scheme.ParameterCodec).Body(obj)
	start := time.Now()
	// Stream records no latency (only Do does): the request's, answer read.
	defer func() { clientmetrics.RequestLatency.Observe(ctx, verb, url.URL{}, time.Since(start)) }()
	body, err := req.Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	_, err = io.Copy(io.Discard, body)
	return err
}

// typed is send through the typed clients, which decode the answer: the
// object written.
func (w *Writer) typed(ctx context.Context, obj runtime.Object, update bool) (runtime.Object, error) {
	switch o := obj.(type) {
	case *corev1.Secret:
		if update {
			return w.client.CoreV1().Secrets(o.Namespace).Update(ctx, o, updateOpts)
		}
		return w.client.CoreV1().Secrets(o.Namespace).Create(ctx, o, createOpts)
	case *corev1.ConfigMap:
		if update {
			return w.client.CoreV1().ConfigMaps(o.Namespace).Update(ctx, o, updateOpts)
		}
		return w.client.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, createOpts)
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
