package status

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Verdict is what courier's reloader would do with a consumer now, and
// why: its decision asked without acting, over what status reads.
type Verdict struct {
	// Verdict is what it does, in a few words ("up to date", "rolls out",
	// "held", "not opted in", …).
	Verdict string `json:"verdict"`
	// Policy is the step of the decision that decided ("" when status
	// could not ask).
	Policy  string `json:"policy,omitempty"`
	Message string `json:"message,omitempty"`
	// Wave is its rollout wave (courier.dev/reload-wave; -1: none, under
	// --compat=reloader without the annotation).
	Wave int `json:"wave"`
}

// Explain tells what the reloader would do with the workload kind
// namespace/name.
type Explain func(ctx context.Context, kind, namespace, name string) (Verdict, error)

// Preview builds an Explain over objects read from the cluster: the
// Secrets and ConfigMaps the workloads consume, in full, courier's digest
// key, and the workloads, typed. main wires the reloader's (package
// internal imports no controller).
type Preview func(r Reloading, objects []runtime.Object) (Explain, error)

// Reloading is what the reloader's decision depends on of the installation.
type Reloading struct {
	Installation          string
	Compat                bool // --compat=reloader
	ReloadAll, NotifyOnly bool
	// Rollouts: it reloads Argo Rollouts (--reload-resources), so a
	// Deployment whose template a Rollout takes is reloaded through it.
	Rollouts bool
	// CSI: it reads the Secrets Store CSI driver's reports (--reload-csi),
	// which status does not.
	CSI    bool
	Roles  role.Config
	View   view.View
	Finder view.Finder
	// Changed (kind/namespace/name): Secrets and ConfigMaps taken to hold
	// new content, for courier plan (nil: none).
	Changed map[string]bool
}

// Verdicts sets the Verdict of every consumer in r. It reads what courier's
// caches hold that the decisions read — the consumers' inputs (by name,
// within scope), the sources of those that are replicas, courier's digest
// key, the digest key of any other installation a baseline names (its
// metadata), and with Rollouts the Rollouts of the consumers' namespaces —
// and asks preview. What it could not read makes the verdicts it decides
// "cannot tell", saying why. Values read are digested by the preview, never
// printed.
func Verdicts(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface, r *Report, c Cluster, scope informers.Scope, rl Reloading, preview Preview) {
	consumers := map[string]bool{}
	for _, s := range r.Sources {
		for _, con := range s.Consumers {
			consumers[objKey(con.Kind, con.Namespace, con.Name)] = true
		}
	}
	rd := &reads{client: client, dyn: dyn, scope: scope, rl: rl, read: map[string]bool{}}
	explain, err := rd.explainer(ctx, c, consumers, preview)
	for i := range r.Sources {
		for j := range r.Sources[i].Consumers {
			con := &r.Sources[i].Consumers[j]
			v, cerr := Verdict{}, err
			switch {
			case cerr == nil && rd.csi[objKey(con.Kind, con.Namespace, con.Name)] != "":
				cerr = fmt.Errorf("it consumes %s, whose content courier reads from the Secrets Store CSI driver's reports (--reload-csi), which status does not read", rd.csi[objKey(con.Kind, con.Namespace, con.Name)])
			case cerr == nil:
				v, cerr = explain(ctx, con.Kind, con.Namespace, con.Name)
			}
			if cerr != nil {
				v = Verdict{Verdict: "cannot tell", Message: cerr.Error()}
			}
			con.Verdict = &v
		}
	}
}

// reads gathers the objects the consumers' decisions need.
type reads struct {
	client  kubernetes.Interface
	dyn     dynamic.Interface
	scope   informers.Scope
	rl      Reloading
	objects []runtime.Object
	read    map[string]bool   // kind/namespace/name: read already
	csi     map[string]string // consumer → a SecretProviderClass it consumes (under CSI)
}

// add reads the Secret or ConfigMap kind ns/name in full, once, and returns
// it (nil when there is none).
func (rd *reads) add(ctx context.Context, kind, ns, name string) (runtime.Object, error) {
	if rd.read[objKey(kind, ns, name)] {
		return nil, nil
	}
	rd.read[objKey(kind, ns, name)] = true
	obj, err := byName(ctx, rd.client, rd.scope, kind, ns, name)
	if obj != nil {
		rd.objects = append(rd.objects, obj)
	}
	return obj, err
}

// explainer reads the objects the consumers' decisions need and builds
// the preview over them.
func (rd *reads) explainer(ctx context.Context, c Cluster, consumers map[string]bool, preview Preview) (Explain, error) {
	if _, err := rd.add(ctx, wellknown.KindSecret, rd.rl.Installation, wellknown.DigestKeySecret); err != nil {
		return nil, fmt.Errorf("courier's digest key, with which it compares what workloads consume, could not be read (%w): run courier status as a user who may list Secrets in %s", err, rd.rl.Installation)
	}
	rolloutsIn := map[string]bool{}
	for _, w := range c.Workloads {
		key := objKey(w.Kind, w.Meta.GetNamespace(), w.Meta.GetName())
		if !consumers[key] {
			continue
		}
		if err := rd.workload(ctx, w, key); err != nil {
			return nil, err
		}
		if obj, ok := w.Meta.(runtime.Object); ok {
			rd.objects = append(rd.objects, obj)
		}
		if rd.rl.Rollouts && w.Kind == workload.Deployment && !rolloutsIn[w.Meta.GetNamespace()] {
			rolloutsIn[w.Meta.GetNamespace()] = true
			if err := rd.rollouts(ctx, w.Meta.GetNamespace()); err != nil {
				return nil, err
			}
		}
	}
	for i, obj := range rd.objects {
		if m, ok := obj.(metav1.Object); ok && rd.rl.Changed[objKey(kindOf(obj), m.GetNamespace(), m.GetName())] {
			rd.objects[i] = withNewContent(obj)
		}
	}
	return preview(rd.rl, rd.objects)
}

// kindOf is a Secret's or ConfigMap's kind ("" for any other object).
func kindOf(obj runtime.Object) string {
	switch obj.(type) {
	case *corev1.Secret:
		return wellknown.KindSecret
	case *corev1.ConfigMap:
		return wellknown.KindConfigMap
	}
	return ""
}

// withNewContent is a copy of a Secret or ConfigMap whose every value
// differs from obj's: what its consumers see after a change of it.
func withNewContent(obj runtime.Object) runtime.Object {
	const changed = "\x00courier-plan"
	switch o := obj.DeepCopyObject().(type) {
	case *corev1.Secret:
		for k, v := range o.Data {
			o.Data[k] = append(v, changed...)
		}
		return o
	case *corev1.ConfigMap:
		for k, v := range o.Data {
			o.Data[k] = v + changed
		}
		for k, v := range o.BinaryData {
			o.BinaryData[k] = append(v, changed...)
		}
		return o
	}
	return obj
}

// workload reads what the decision on consumer w (keyed key) reads besides
// w: its inputs, their sources, another installation's key.
func (rd *reads) workload(ctx context.Context, w Workload, key string) error {
	ns := w.Meta.GetNamespace()
	var template map[string]string
	if w.Template != nil {
		template = w.Template.Annotations
	}
	for _, in := range workload.WithNamed(inputs.Of(w.Spec), w.Meta.GetAnnotations(), template) {
		if in.Kind == wellknown.KindSecretProviderClass && rd.rl.CSI {
			if rd.csi == nil {
				rd.csi = map[string]string{}
			}
			rd.csi[key] = in.ID()
		}
		if in.Kind != wellknown.KindSecret && in.Kind != wellknown.KindConfigMap {
			continue
		}
		obj, err := rd.add(ctx, in.Kind, ns, in.Name)
		if err != nil {
			return fmt.Errorf("an input of %s %s/%s could not be read: %w", w.Kind, ns, w.Meta.GetName(), err)
		}
		// A replica opts in through its source's courier.dev/reload.
		if m, ok := obj.(metav1.Object); ok && m.GetAnnotations()[wellknown.Source] != "" {
			if srcNS, srcName, err := cache.SplitMetaNamespaceKey(m.GetAnnotations()[wellknown.Source]); err == nil && srcNS != "" {
				if _, err := rd.add(ctx, in.Kind, srcNS, srcName); err != nil {
					return fmt.Errorf("the source of an input of %s %s/%s could not be read: %w", w.Kind, ns, w.Meta.GetName(), err)
				}
			}
		}
	}
	if inst := baselineInstallation(w.Meta.GetAnnotations()[wellknown.ConfigInputs]); inst != "" && inst != rd.rl.Installation && !rd.read[objKey(wellknown.KindSecret, inst, wellknown.DigestKeySecret)] {
		// Whether that installation is there: its key, metadata only.
		rd.read[objKey(wellknown.KindSecret, inst, wellknown.DigestKeySecret)] = true
		m, err := rd.rl.Finder.Find(ctx, wellknown.KindSecret, inst, wellknown.DigestKeySecret)
		if err != nil {
			return fmt.Errorf("whether the installation in %s that wrote the baseline of %s %s/%s is there could not be read: %w", inst, w.Kind, ns, w.Meta.GetName(), err)
		}
		if m != nil {
			rd.objects = append(rd.objects, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID, Labels: m.Labels}})
		}
	}
	return nil
}

// rollouts reads the Argo Rollouts of namespace ns.
func (rd *reads) rollouts(ctx context.Context, ns string) error {
	kind := workload.Custom{Resource: workload.Resource{GroupResource: workload.Rollouts, Path: workload.HashPath(workload.Deployment)}, Version: "v1alpha1", Kind: "Rollout"}
	l, err := rd.dyn.Resource(kind.GVR()).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("the Argo Rollouts of namespace %s could not be read: %w", ns, err)
	}
	for i := range l.Items {
		o, _ := workload.ObjectOf(kind, &l.Items[i]) // one courier cannot read reloads nothing: as the daemon
		rd.objects = append(rd.objects, o)
	}
	return nil
}

// baselineInstallation is the installation a baseline
// (courier.dev/config-inputs) names ("" for none).
func baselineInstallation(baseline string) string {
	for _, part := range strings.Split(baseline, ",") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(part), "installation="); ok {
			return v
		}
	}
	return ""
}

// byName reads the Secret or ConfigMap kind ns/name in full as courier's
// caches see it: a list by name within scope's selectors (courier's RBAC
// grants list, never get). nil when there is none.
func byName(ctx context.Context, client kubernetes.Interface, scope informers.Scope, kind, ns, name string) (runtime.Object, error) {
	field := "metadata.name=" + name
	if kind == wellknown.KindSecret {
		o := scope.SecretOptions()
		o.FieldSelector = joinSelectors(o.FieldSelector, field)
		l, err := client.CoreV1().Secrets(ns).List(ctx, o)
		if err != nil || len(l.Items) == 0 {
			return nil, err
		}
		return &l.Items[0], nil
	}
	o := scope.ConfigMapOptions()
	o.FieldSelector = joinSelectors(o.FieldSelector, field)
	l, err := client.CoreV1().ConfigMaps(ns).List(ctx, o)
	if err != nil || len(l.Items) == 0 {
		return nil, err
	}
	return &l.Items[0], nil
}

func joinSelectors(a, b string) string {
	if a == "" {
		return b
	}
	return a + "," + b
}
