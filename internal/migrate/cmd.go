package migrate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/pager"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/status"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Main is `courier migrate`. It returns the exit code: 0, 1 when the
// cluster could not be read or written, 2 on bad flags.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := config.NewSubcommand("migrate", "Lists every object carrying Stakater Reloader's, kubernetes-replicator's or Reflector's annotations,\nthe courier.dev annotations that mean the same, and what courier cannot honour and why.\nWith --apply it adds the courier annotations. Give it the flags (or COURIER_* variables) courier runs with.", stderr)
	var reloadAll, apply bool
	var resources workload.Resources
	cmd.Flags.BoolVar(&reloadAll, "reload-all", false, "as courier's flag (and Reloader's --auto-reload-all)")
	cmd.Flags.Var(&resources, "reload-resources", "as courier's flag: the custom kinds it reloads (Rollouts carrying Reloader's annotations are listed whether or not it names rollouts.argoproj.io)")
	cmd.Flags.BoolVar(&apply, "apply", false, "add the courier annotations to the objects (the other tools' annotations are never removed)")
	var src globs.List
	var scope informers.Scope
	code, ok := cmd.Parse(args, getenv, func() (err error) {
		if src, _, err = config.NamespaceGlobs(cmd.SourceNS, "", cmd.Namespace); err != nil {
			return err
		}
		scope.ResourceLabels = cmd.ResourceLabels
		scope.Namespaces, err = config.WatchNamespaces(cmd.WatchNS, src, cmd.Namespace)
		return err
	})
	if !ok {
		return code
	}
	o := Options{SourceNamespaces: src, ReloadAll: reloadAll}
	for _, r := range resources {
		o.ReloadsRollouts = o.ReloadsRollouts || r.GroupResource == workload.Rollouts
	}
	if err := run(context.Background(), cmd, o, scope, apply, stdout); err != nil {
		cmd.Fail(err)
		return 1
	}
	return 0
}

func run(ctx context.Context, cmd *config.Subcommand, o Options, scope informers.Scope, apply bool, w io.Writer) error {
	client, meta, err := cmd.Clients()
	if err != nil {
		return err
	}
	c, err := status.Collect(ctx, client, meta, source.Compat{}, scope)
	if err != nil {
		return err
	}
	dyn, err := cmd.Dynamic()
	if err != nil {
		return err
	}
	if err := collectRollouts(ctx, cmd, client, dyn, scope, o.ReloadsRollouts, &c); err != nil {
		return err
	}
	r := Plan(c, o)
	var applyErr error
	if apply {
		applyErr = r.Apply(ctx, client, dyn)
	}
	if cmd.Output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if err := r.WriteTable(w, apply); err != nil {
		return err
	}
	return applyErr
}

// collectRollouts adds Argo Rollouts' Rollouts to c's workloads when the
// cluster serves them: each with its own pod template, or, with
// spec.workloadRef, its Deployment's. Rollouts that cannot be read are an
// error: a report without them would say nothing is left to migrate.
//
// With --watch-namespaces and without reloads (--reload-resources naming
// rollouts.argoproj.io), whose Roles then grant no Rollouts, a refusal in a
// namespace is said on stderr and the report goes on without them.
func collectRollouts(ctx context.Context, cmd *config.Subcommand, client kubernetes.Interface, dyn dynamic.Interface, scope informers.Scope, reloads bool, c *status.Cluster) error {
	version := ""
	groups, err := client.Discovery().ServerGroups()
	if err != nil {
		return fmt.Errorf("discover the API groups (to find Argo Rollouts): %w", err)
	}
	for _, g := range groups.Groups {
		if g.Name == workload.Rollouts.Group {
			version = g.PreferredVersion.Version
		}
	}
	if version == "" {
		return nil // nothing of argoproj.io is installed
	}
	gvr := workload.Rollouts.WithVersion(version)
	resources, err := client.Discovery().ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	if err != nil {
		return fmt.Errorf("discover %s (to find Argo Rollouts): %w", gvr.GroupVersion(), err)
	}
	if !slices.ContainsFunc(resources.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource }) {
		return nil // argoproj.io without Rollouts (Argo CD alone)
	}
	deployments := map[string]*corev1.PodTemplateSpec{}
	for _, w := range c.Workloads {
		if w.Kind == workload.Deployment {
			deployments[w.Meta.GetNamespace()+"/"+w.Meta.GetName()] = w.Template
		}
	}
	for _, ns := range scope.Each() {
		err := eachRollout(ctx, dyn, gvr, ns, deployments, c)
		if apierrors.IsForbidden(err) && !reloads && len(scope.Namespaces) > 0 {
			// A namespace-scoped courier's Roles grant the kind only
			// with --reload-resources: say what the report leaves out,
			// and go on.
			cmd.Fail(fmt.Errorf("not listing Argo Rollouts' Rollouts in namespace %q: %w (courier, without --reload-resources=rollouts.argoproj.io, does not reload them either)", ns, err))
			continue
		}
		if err != nil {
			return fmt.Errorf("list Argo Rollouts' Rollouts (%s), which courier reloads with --reload-resources=rollouts.argoproj.io; without them this report would be incomplete: %w", gvr, err)
		}
	}
	return nil
}

// eachRollout adds the Rollouts of namespace ns ("": all) to c's workloads.
func eachRollout(ctx context.Context, dyn dynamic.Interface, gvr schema.GroupVersionResource, ns string, deployments map[string]*corev1.PodTemplateSpec, c *status.Cluster) error {
	return each(ctx, func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return dyn.Resource(gvr).Namespace(ns).List(ctx, o)
	}, func(obj runtime.Object) error {
		u := obj.(*unstructured.Unstructured)
		tmpl := &corev1.PodTemplateSpec{}
		if ref, ok, _ := unstructured.NestedString(u.Object, "spec", "workloadRef", "name"); ok {
			if tmpl = deployments[u.GetNamespace()+"/"+ref]; tmpl == nil {
				return nil // its Deployment is not there: nothing to reload
			}
		} else if t, ok, _ := unstructured.NestedMap(u.Object, "spec", "template"); ok {
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(t, tmpl); err != nil {
				return nil // not a pod template: courier does not reload it either
			}
		}
		c.Workloads = append(c.Workloads, status.Workload{Kind: workload.Rollout, Meta: u, Template: tmpl, Spec: &tmpl.Spec, Resource: &gvr})
		return nil
	})
}

// each calls fn for every item of every page (500 per request).
func each(ctx context.Context, list pager.ListPageFunc, fn func(runtime.Object) error) error {
	p := pager.New(list)
	p.PageSize = 500
	return p.EachListItem(ctx, metav1.ListOptions{}, fn)
}

// Apply adds each object's courier annotations with a merge patch, as field
// manager courier-migrate; nothing else of the object changes. An object
// deleted since it was listed is marked Gone, not an error: in a live
// cluster objects come and go while the report is made.
func (r *Report) Apply(ctx context.Context, client kubernetes.Interface, dyn dynamic.Interface) error {
	var errs []error
	opts := metav1.PatchOptions{FieldManager: wellknown.FieldManager + "-migrate"}
	for i := range r.Objects {
		obj := &r.Objects[i]
		if len(obj.Add) == 0 {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": obj.Add}})
		ns, name, pt := obj.Namespace, obj.Name, types.MergePatchType
		var err error
		switch obj.Kind {
		case wellknown.KindSecret:
			_, err = client.CoreV1().Secrets(ns).Patch(ctx, name, pt, patch, opts)
		case wellknown.KindConfigMap:
			_, err = client.CoreV1().ConfigMaps(ns).Patch(ctx, name, pt, patch, opts)
		case "Deployment":
			_, err = client.AppsV1().Deployments(ns).Patch(ctx, name, pt, patch, opts)
		case "StatefulSet":
			_, err = client.AppsV1().StatefulSets(ns).Patch(ctx, name, pt, patch, opts)
		case "DaemonSet":
			_, err = client.AppsV1().DaemonSets(ns).Patch(ctx, name, pt, patch, opts)
		case "CronJob":
			_, err = client.BatchV1().CronJobs(ns).Patch(ctx, name, pt, patch, opts)
		case "Job":
			_, err = client.BatchV1().Jobs(ns).Patch(ctx, name, pt, patch, opts)
		default:
			if obj.resource == nil {
				err = fmt.Errorf("courier migrate does not write %s objects", obj.Kind)
				break
			}
			_, err = dyn.Resource(*obj.resource).Namespace(ns).Patch(ctx, name, pt, patch, opts)
		}
		switch {
		case apierrors.IsNotFound(err):
			obj.Gone = true
		case err != nil:
			errs = append(errs, fmt.Errorf("%s %s/%s: %w", obj.Kind, ns, name, err))
		default:
			obj.Applied = true
		}
	}
	return errors.Join(errs...)
}

// WriteTable writes one line per object and one per annotation courier
// cannot honour.
func (r Report) WriteTable(w io.Writer, applied bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if len(r.Objects) == 0 {
		fmt.Fprintln(tw, "No object carries Stakater Reloader's, kubernetes-replicator's or Reflector's annotations.")
		return tw.Flush()
	}
	fmt.Fprintln(tw, "OBJECT\tTHEIR ANNOTATIONS\tCOURIER ANNOTATIONS")
	n := 0
	for _, o := range r.Objects {
		add := pairs(o.Add)
		switch {
		case add == "":
			add = "-"
		case applied && o.Applied:
			add += " (added)"
		case applied && o.Gone:
			add += " (not added: deleted since it was listed)"
		case applied:
			add += " (NOT added: see the error)"
		}
		if o.Applied {
			n++
		}
		fmt.Fprintf(tw, "%s %s/%s\t%s\t%s\n", o.Kind, o.Namespace, o.Name, pairs(o.Found), add)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "OBJECT\tNOT HONOURED AS THERE\tWHY")
	for _, o := range r.Objects {
		for _, nh := range o.NotHonoured {
			fmt.Fprintf(tw, "%s %s/%s\t%s\t%s\n", o.Kind, o.Namespace, o.Name, nh.Annotation, nh.Why)
		}
	}
	if applied {
		fmt.Fprintf(tw, "\nAnnotations added to %d objects; the other tools' annotations are left in place.\n", n)
	} else {
		fmt.Fprintln(tw, "\nNothing was changed; run again with --apply to add the courier annotations.")
	}
	return tw.Flush()
}

func pairs(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = k + "=" + strings.TrimSpace(m[k])
	}
	return strings.Join(out, " ")
}
