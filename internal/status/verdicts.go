package status

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

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
	Roles                 role.Config
	View                  view.View
	Finder                view.Finder
}

// Verdicts sets the Verdict of every consumer in r. It reads what courier's
// caches hold of the consumers' inputs (by name, within scope) and courier's
// digest key, and asks preview; what it could not read makes every verdict
// "cannot tell", saying why. Values read are digested by the preview, never
// printed.
func Verdicts(ctx context.Context, client kubernetes.Interface, r *Report, c Cluster, scope informers.Scope, rl Reloading, preview Preview) {
	explain, err := explainer(ctx, client, r, c, scope, rl, preview)
	for i := range r.Sources {
		for j := range r.Sources[i].Consumers {
			con := &r.Sources[i].Consumers[j]
			v := Verdict{Verdict: "cannot tell", Message: fmt.Sprint(err)}
			if err == nil {
				if v, err = explain(ctx, con.Kind, con.Namespace, con.Name); err != nil {
					v = Verdict{Verdict: "cannot tell", Message: err.Error()}
				}
			}
			con.Verdict = &v
		}
	}
}

// explainer reads the objects the consumers' decisions need and builds
// the preview over them.
func explainer(ctx context.Context, client kubernetes.Interface, r *Report, c Cluster, scope informers.Scope, rl Reloading, preview Preview) (Explain, error) {
	consumers := map[string]bool{}
	for _, s := range r.Sources {
		for _, con := range s.Consumers {
			consumers[objKey(con.Kind, con.Namespace, con.Name)] = true
		}
	}
	var objects []runtime.Object
	read := map[string]bool{}
	add := func(kind, ns, name string) error {
		if read[objKey(kind, ns, name)] {
			return nil
		}
		read[objKey(kind, ns, name)] = true
		obj, err := byName(ctx, client, scope, kind, ns, name)
		if obj != nil {
			objects = append(objects, obj)
		}
		return err
	}
	if err := add(wellknown.KindSecret, rl.Installation, wellknown.DigestKeySecret); err != nil {
		return nil, fmt.Errorf("courier's digest key, with which it compares what workloads consume, could not be read (%w): run courier status as a user who may list Secrets in %s", err, rl.Installation)
	}
	for _, w := range c.Workloads {
		if !consumers[objKey(w.Kind, w.Meta.GetNamespace(), w.Meta.GetName())] {
			continue
		}
		var template map[string]string
		if w.Template != nil {
			template = w.Template.Annotations
		}
		for _, in := range workload.WithNamed(inputs.Of(w.Spec), w.Meta.GetAnnotations(), template) {
			if in.Kind != wellknown.KindSecret && in.Kind != wellknown.KindConfigMap {
				continue
			}
			if err := add(in.Kind, w.Meta.GetNamespace(), in.Name); err != nil {
				return nil, fmt.Errorf("an input of %s %s/%s could not be read: %w", w.Kind, w.Meta.GetNamespace(), w.Meta.GetName(), err)
			}
		}
		if obj, ok := w.Meta.(runtime.Object); ok {
			objects = append(objects, obj)
		}
	}
	return preview(rl, objects)
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
