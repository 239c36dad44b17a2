// Package migrate is `courier migrate`: it finds every object carrying the
// annotations of Stakater Reloader, kubernetes-replicator or Reflector, says
// which courier.dev annotations mean the same (and, with --apply, adds them,
// never removing the old ones), and says what courier cannot honour and why.
package migrate

import (
	"cmp"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/stakater"
	"github.com/courier-k8s/courier/internal/status"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Report is what `courier migrate` prints.
type Report struct {
	Objects []Object `json:"objects"`
}

// Object is one object carrying another tool's annotations.
type Object struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Found are the other tools' annotations it carries.
	Found map[string]string `json:"found"`
	// Add are the courier annotations that mean the same.
	Add map[string]string `json:"add,omitempty"`
	// NotHonoured says, per annotation, what courier does not do as the
	// other tool does, and why.
	NotHonoured []Note `json:"notHonoured,omitempty"`
	// Applied: --apply added Add.
	Applied bool `json:"applied,omitempty"`
	// Gone: --apply found the object deleted since it was listed (not an
	// error: there is nothing left to annotate).
	Gone bool `json:"gone,omitempty"`
	// resource is what --apply patches for a custom kind (a Rollout).
	resource *schema.GroupVersionResource
}

// Note is one annotation courier cannot honour as its tool does.
type Note struct {
	Annotation string `json:"annotation"`
	Why        string `json:"why"`
}

// Options are the daemon's flags the mapping depends on.
type Options struct {
	SourceNamespaces globs.List
	ReloadAll        bool
	// ReloadsRollouts: --reload-resources lists rollouts.argoproj.io.
	ReloadsRollouts bool
}

// toolPrefixes are the key prefixes of the tools courier reads.
var toolPrefixes = []string{"reloader.stakater.com/", ".reloader.stakater.com/", source.MittwaldPrefix, source.ReflectorPrefix}

func found(a map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range a {
		for _, p := range toolPrefixes {
			if strings.HasPrefix(k, p) || (strings.HasPrefix(p, ".") && strings.Contains(k, p)) {
				out[k] = v
			}
		}
	}
	return out
}

// Plan maps what c holds. It reads nothing and writes nothing.
func Plan(c status.Cluster, o Options) Report {
	var r Report
	names := make([]string, 0, len(c.Namespaces))
	for _, ns := range c.Namespaces {
		names = append(names, ns.Name)
	}
	byName := map[string]metav1.Object{}
	for _, obj := range c.Objects {
		byName[obj.Kind+"/"+obj.Meta.GetNamespace()+"/"+obj.Meta.GetName()] = obj.Meta
	}
	for _, obj := range c.Objects {
		if f := found(obj.Meta.GetAnnotations()); len(f) > 0 {
			r.Objects = append(r.Objects, planContent(obj.Kind, obj.Meta, f, names, o))
		}
	}
	for _, w := range c.Workloads {
		tmpl := w.Template
		f := found(w.Meta.GetAnnotations())
		maps.Copy(f, found(tmpl.Annotations))
		if len(f) > 0 {
			obj := planWorkload(w, tmpl, f, byName, o)
			obj.resource = w.Resource
			if w.Kind == workload.Rollout && !o.ReloadsRollouts {
				obj.note(firstOf(f, slices.Sorted(maps.Keys(f))...), "courier reloads Rollouts only with --reload-resources=rollouts.argoproj.io (and its RBAC): add it, or this Rollout stops reloading once --compat=reloader goes")
			}
			r.Objects = append(r.Objects, obj)
		}
	}
	slices.SortFunc(r.Objects, func(a, b Object) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	return r
}

func (obj *Object) note(annotation, why string) {
	obj.NotHonoured = append(obj.NotHonoured, Note{annotation, why})
}

func (obj *Object) add(key, value string, existing map[string]string) {
	if v, ok := existing[key]; ok {
		if v != value {
			obj.note(key, "already set to "+strconv.Quote(v)+"; the other tool's annotations would mean "+strconv.Quote(value)+", which is not written over it")
		}
		return
	}
	if obj.Add == nil {
		obj.Add = map[string]string{}
	}
	obj.Add[key] = value
}

// planContent maps a Secret's or ConfigMap's annotations.
func planContent(kind string, m metav1.Object, f map[string]string, namespaces []string, o Options) Object {
	obj := Object{Kind: kind, Namespace: m.GetNamespace(), Name: m.GetName(), Found: f}
	a := m.GetAnnotations()
	r := role.Of(m, "", role.Config{Compat: source.Compat{Replicator: true, Reflector: true}, Allowed: o.SourceNamespaces.Match})
	if tool := source.CopiedBy(a); tool != "" {
		obj.note(firstOf(f, source.MittwaldReplicatedFromVersion, source.ReflectorReflects),
			"a copy "+tool+" made (unless it also pulls): courier leaves it and reports a ReplicaConflict for it; once "+tool+" no longer runs, delete it and courier creates its replica")
	}
	if r.PullVia != "" {
		obj.note(r.PullVia, "a pull from "+r.PullRef+": courier honours it only with --compat (courier.dev/ has no pull: sources push). Keep --compat for it, or, where it has its source's name, let the source select this namespace in courier.dev/replicate-to")
	}
	if r.Pushes {
		planSource(&obj, a, namespaces, o)
	} else if r.AllowsPulls {
		obj.note(firstOf(f, source.MittwaldAllowed, source.ReflectorAllowed), "lets objects pull from it: read with --compat for them; there is nothing to add")
	}
	for k := range f {
		switch k {
		case stakater.Match:
			obj.note(k, "read for the workloads that search: courier.dev/reload-on on each names this object")
		case stakater.Ignore:
			obj.note(k, "courier has no per-object opt-out: the courier.dev/reload-on this migration writes on workloads leaves this object out (courier.dev/reload: \"true\" on a workload would not)")
		case source.MittwaldPrefix + "strip-labels", source.MittwaldPrefix + "strip-annotations":
			obj.note(k, "courier copies no labels or annotations unless courier.dev/copy-labels or copy-annotations lists them")
		case source.MittwaldPrefix + "keep-owner-references":
			obj.note(k, "courier never copies owner references (the owner lives in the source's namespace)")
		}
	}
	return obj
}

// planSource maps a push source's annotations to courier.dev/replicate-to.
func planSource(obj *Object, a map[string]string, namespaces []string, o Options) {
	if !o.SourceNamespaces.Match(obj.Namespace) {
		obj.note(firstOf(obj.Found, source.MittwaldReplicateTo, source.MittwaldReplicateToMatching, source.ReflectorAutoEnabled),
			"namespace "+obj.Namespace+" is not in --source-namespaces: courier ignores this source (SourceNotAllowed) until it is")
	}
	if _, ok := a[wellknown.ReplicateTo]; ok {
		return // courier's own key already decides; the other tools' are not read
	}
	to, hasTo := a[source.MittwaldReplicateTo]
	matching, hasMatching := a[source.MittwaldReplicateToMatching]
	switch {
	case hasTo && hasMatching:
		obj.note(source.MittwaldReplicateTo, "with replicate-to-matching it means the union of names and a label selector, which one courier.dev/replicate-to selector cannot say: label the named namespaces and select by label")
	case hasMatching:
		obj.add(wellknown.ReplicateTo, strings.TrimSpace(matching), a)
	case hasTo:
		obj.addNames(source.MittwaldReplicateTo, byName(obj, source.MittwaldReplicateTo, source.Items(to), func(ns string) bool { return match(a, ns) }, namespaces), a)
	default: // Reflector's automatic mirrors
		allowed, auto := a[source.ReflectorAllowedNamespaces], a[source.ReflectorAutoNamespaces]
		allowedSel, autoSel := strings.TrimSpace(a[source.ReflectorAllowedSelector]), strings.TrimSpace(a[source.ReflectorAutoSelector])
		switch {
		case (allowedSel != "" || autoSel != "") && allowed == "" && auto == "":
			// Selectors only: the namespaces both match, one label selector.
			var sels []string
			for _, sel := range []string{allowedSel, autoSel} {
				if sel != "" {
					sels = append(sels, sel)
				}
			}
			obj.add(wellknown.ReplicateTo, strings.Join(sels, ","), a)
			return
		case allowedSel != "" || autoSel != "":
			obj.note(firstOf(obj.Found, source.ReflectorAutoSelector, source.ReflectorAllowedSelector),
				"with a namespace list it means the namespaces the list or the selector match, which one courier.dev/replicate-to selector cannot say: keep --compat=reflector for it, or label the listed namespaces and select by label")
			return
		}
		if allowed == "" && auto == "" {
			obj.add(wellknown.ReplicateTo, "*", a)
			return
		}
		items := source.Items(allowed)
		if allowed == "" || (auto != "" && !plain(items)) {
			items = source.Items(auto)
		}
		obj.addNames(source.ReflectorAutoEnabled, byName(obj, source.ReflectorAutoEnabled, items, func(ns string) bool { return match(a, ns) }, namespaces), a)
	}
}

// match reports whether the source's own annotations target ns by name.
func match(a map[string]string, ns string) bool {
	t, err := source.TargetsOf(a, source.Compat{Replicator: true, Reflector: true})
	return err == nil && t.Matches(namespaces.Named(ns))
}

// addNames adds the courier.dev/replicate-to that selects names, or says
// that the source targets no namespace.
func (obj *Object) addNames(annotation string, names []string, existing map[string]string) {
	if len(names) == 0 {
		obj.note(annotation, "targets no namespace (now): there is nothing to write")
		return
	}
	obj.add(wellknown.ReplicateTo, wellknown.NamespaceName+" in ("+strings.Join(names, ",")+")", existing)
}

// byName is the namespaces a name list means: the names themselves when
// they are plain, else the namespaces that match now.
func byName(obj *Object, annotation string, items []string, matches func(string) bool, namespaces []string) []string {
	var names []string
	if plain(items) {
		for _, it := range items {
			if matches(it) {
				names = append(names, it)
			}
		}
	} else {
		for _, ns := range namespaces {
			if ns != obj.Namespace && matches(ns) {
				names = append(names, ns)
			}
		}
		obj.note(annotation, "its patterns are written out as the namespaces that match now; a namespace created later that matches is not covered: label such namespaces and select by label instead")
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// plain reports whether every item is a namespace name, not a pattern.
func plain(items []string) bool {
	for _, it := range items {
		if len(validation.IsDNS1123Label(it)) > 0 {
			return false
		}
	}
	return true
}

func firstOf(f map[string]string, keys ...string) string {
	for _, k := range keys {
		if _, ok := f[k]; ok {
			return k
		}
	}
	return keys[0]
}

// planWorkload maps Reloader's annotations on a workload: the inputs
// Reloader would roll it for, as courier reads them (reloader.Stakater).
func planWorkload(w status.Workload, tmpl *corev1.PodTemplateSpec, f map[string]string, byName map[string]metav1.Object, o Options) Object {
	m := w.Meta
	obj := Object{Kind: w.Kind, Namespace: m.GetNamespace(), Name: m.GetName(), Found: f}
	a := m.GetAnnotations()
	for _, k := range []string{wellknown.Reload, wellknown.ReloadOn} {
		if _, ok := a[k]; ok {
			obj.note(k, "the workload already carries courier's opt-ins, which courier reads alongside Reloader's; nothing is added")
			return obj
		}
	}
	// What the template consumes, and what Reloader's lists name besides
	// (courier reloads for those too: read whole).
	refs := workload.WithNamed(inputs.Of(w.Spec), a, tmpl.Annotations)
	reloadAll := o.ReloadAll && w.Kind != workload.Job // courier recreates a Job only when it opts in itself
	var reloaded []string
	blocked := 0
	for _, ref := range refs {
		in := byName[ref.Kind+"/"+obj.Namespace+"/"+ref.Name]
		inputAnnotation := func(k string) string {
			if in == nil {
				return ""
			}
			return in.GetAnnotations()[k]
		}
		v, bad := stakater.Decide(ref.Kind, ref.Name, a, tmpl.Annotations, inputAnnotation, reloadAll)
		for _, b := range bad {
			obj.note(stakater.TypedReload(ref.Kind), strconv.Quote(b)+" is not a valid regular expression; Reloader and courier skip it")
		}
		switch v {
		case stakater.Reload:
			reloaded = append(reloaded, ref.ID())
			if ref.Kind == wellknown.KindSecretProviderClass {
				obj.note(stakater.TypedReload(ref.Kind), "courier reloads for a SecretProviderClass only with --reload-csi and its RBAC (as Reloader only with --enable-csi-integration)")
			}
		case stakater.Blocked:
			blocked++
		}
	}
	switch {
	case len(reloaded) > 0 && len(reloaded) == len(refs) &&
		source.IsTrue(stakater.Annotations(wellknown.KindSecret, a, tmpl.Annotations)[stakater.Auto]) &&
		source.IsTrue(stakater.Annotations(wellknown.KindConfigMap, a, tmpl.Annotations)[stakater.Auto]):
		obj.add(wellknown.Reload, "true", a)
	case len(reloaded) > 0:
		obj.add(wellknown.ReloadOn, strings.Join(reloaded, ", "), a)
		if reloadAll && blocked < len(refs)-len(reloaded) {
			obj.note(stakater.Auto, "under --reload-all courier also reloads it for the inputs not listed")
		}
	case blocked > 0 && blocked == len(refs) && reloadAll:
		obj.add(wellknown.Reload, "false", a)
	}
	for _, kind := range []string{wellknown.KindSecret, wellknown.KindConfigMap, wellknown.KindSecretProviderClass} {
		key := stakater.TypedReload(kind)
		for _, it := range source.Items(stakater.Annotations(kind, a, tmpl.Annotations)[key]) {
			if len(validation.IsDNS1123Subdomain(it)) > 0 {
				obj.note(key, strconv.Quote(it)+" is a pattern: written out as the objects the workload consumes now")
			}
		}
	}
	for k := range f {
		switch {
		case k == stakater.PausePeriod && w.Kind == workload.Deployment && m.GetAnnotations()[k] != "":
			// courier holds the rollout itself for as long, rather than
			// pausing the Deployment.
			obj.add(wellknown.ReloadMinInterval, f[k], a)
		case k == "reloader.stakater.com/rollout-strategy", strings.HasSuffix(k, "reloader.stakater.com/pause-period"):
			obj.note(k, "courier always rolls out through the workload's own strategy (courier.dev/config-hash in the pod template); there is no restart or pause mode (Reloader's pause-period on a Deployment's own metadata becomes courier.dev/reload-min-interval)")
		}
	}
	if obj.Add == nil && len(obj.NotHonoured) == 0 {
		obj.note(firstOf(f, stakater.Auto, stakater.Search), "opts the workload in for none of what it consumes now; nothing to add")
	}
	return obj
}
