// Package status builds the report `courier status` prints: for every
// source, its selector, how many namespaces it targets and how many of
// those hold a replica in sync, are blocked by a conflict or are in error,
// and the last reload of each workload consuming the source or a replica.
//
// It reads the cluster the way a user would (any kubeconfig, list rights on
// Secrets, ConfigMaps, namespaces and workloads), not courier's metrics, so
// it also tells the truth when courier is not running.
package status

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/settings"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Report is what `courier status` prints.
type Report struct {
	// Installation is the running courier whose settings the report
	// follows (nil when none published any: the flags and their defaults).
	Installation *Installation `json:"installation,omitempty"`
	// Scope says what a namespace-scoped or label-selected courier does
	// not see ("" for a courier that sees everything).
	Scope   string   `json:"scope,omitempty"`
	Sources []Source `json:"sources"`
	// CustomKinds are the kinds of --reload-resources (none without it).
	CustomKinds []CustomKind `json:"customKinds,omitempty"`
	// Changes are the changes of sources still rolling out, by wave.
	Changes []Change `json:"changes,omitempty"`
	// Clusters are the clusters courier replicates into (cluster Secrets
	// in its namespace); ClustersNote says why they could not be read.
	Clusters     []RemoteCluster `json:"clusters,omitempty"`
	ClustersNote string          `json:"clustersNote,omitempty"`
}

// Change is the consumers of one source in one wave whose rollout for a
// change is still to come: about to roll out, waiting for an earlier wave,
// or halted.
type Change struct {
	Source    string   `json:"source"` // kind namespace/name
	Wave      int      `json:"wave"`
	State     string   `json:"state"` // the verdict they share
	Workloads []string `json:"workloads"`
}

// inProgress are the changes still rolling out, from the consumers'
// verdicts: per source, wave and state, in wave order.
func inProgress(sources []Source) []Change {
	var out []Change
	for _, s := range sources {
		at := map[[2]string]int{} // wave, state → index in out
		for _, c := range s.Consumers {
			v := c.Verdict
			if v == nil || (v.Verdict != "rolls out" && v.Verdict != "waits for an earlier wave" && v.Verdict != "halted") {
				continue
			}
			k := [2]string{strconv.Itoa(max(v.Wave, 0)), v.Verdict}
			i, ok := at[k]
			if !ok {
				i, at[k] = len(out), len(out)
				out = append(out, Change{Source: s.Kind + " " + s.Ref(), Wave: max(v.Wave, 0), State: v.Verdict})
			}
			out[i].Workloads = append(out[i].Workloads, c.Kind+" "+c.Namespace+"/"+c.Name)
		}
	}
	slices.SortStableFunc(out, func(a, b Change) int { return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(a.Wave, b.Wave)) })
	return out
}

// Installation is the settings a courier installation's leader published,
// and the flags given to status that override them.
type Installation struct {
	settings.Installation
	Overridden []string `json:"overridden,omitempty"`
}

// Source is one object carrying courier.dev/replicate-to.
type Source struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Selector  string `json:"selector"`
	// Via names another tool's annotation that makes it a source (with
	// --compat); Selector then holds its value ("" for courier's own).
	Via string `json:"via,omitempty"`
	// Keys, CopyLabels and CopyAnnotations are the source's
	// courier.dev/replicate-keys, copy-labels and copy-annotations ("" when
	// it has none: every key, no metadata).
	Keys            string `json:"keys,omitempty"`
	CopyLabels      string `json:"copyLabels,omitempty"`
	CopyAnnotations string `json:"copyAnnotations,omitempty"`
	// Problem says why courier ignores the source ("" when it does not).
	Problem string `json:"problem,omitempty"`
	// Targets counts the eligible namespaces the selector matches.
	Targets int `json:"targets"`
	// InSync counts targets holding this source's replica with its content.
	InSync int `json:"inSync"`
	// Conflict counts targets where an object courier does not own, or
	// another source's replica, holds the name.
	Conflict int `json:"conflict"`
	// Error counts targets whose replica is missing or stale: courier is
	// retrying (see its Events and log) or is not running.
	Error     int        `json:"error"`
	Consumers []Consumer `json:"consumers"`
}

// Ref is "namespace/name".
func (s Source) Ref() string { return s.Namespace + "/" + s.Name }

// Consumer is a workload that consumes the source or one of its replicas.
type Consumer struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Input is the consumed object, in the workload's namespace.
	Input string `json:"input"`
	// NamedBy is the annotation that makes Input an input although the pod
	// template does not reference it (read whole); "" when it does.
	NamedBy string `json:"namedBy,omitempty"`
	// NotifyOnly: courier tells of its rollouts instead of making them
	// (courier.dev/reload: notify, or the installation's --reload-mode).
	NotifyOnly bool `json:"notifyOnly,omitempty"`
	// ReloadedAt and ReloadedFor are courier's record of the last rollout
	// ("" when courier never rolled it out).
	ReloadedAt  string `json:"reloadedAt,omitempty"`
	ReloadedFor string `json:"reloadedFor,omitempty"`
	// Verdict is what courier's reloader would do with it now, and why
	// (nil when status was not given the decision: see Verdicts).
	Verdict *Verdict `json:"verdict,omitempty"`
}

// Options are the daemon's flags that decide what a source does.
type Options struct {
	// Installation is courier's namespace, which its replicas name.
	Installation                        string
	Compat                              source.Compat
	SourceNamespaces, ExcludeNamespaces globs.List
	// NotifyOnly: the installation runs with --reload-mode=notify.
	NotifyOnly bool
}

// roleOf is what m is to the courier these Options describe (package
// role); a push does not depend on the type, which metadata lacks.
func (o Options) roleOf(m metav1.Object) role.Role {
	return role.Of(m, "", o.roles())
}

// roles is the configuration roles depend on (package role) of the courier
// these Options describe.
func (o Options) roles() role.Config {
	return role.Config{Compat: o.Compat, Allowed: o.SourceNamespaces.Match, Namespace: o.Installation}
}

// Cluster is what the report is built from.
type Cluster struct {
	Namespaces []corev1.Namespace
	// Objects are every Secret and ConfigMap (metadata is enough for all but
	// sources, whose Hash is set).
	Objects   []Object
	Workloads []Workload
}

// Object is one Secret or ConfigMap.
type Object struct {
	Kind string
	Meta metav1.Object
	// Hash is the content hash, set for sources only.
	Hash string
}

// Workload is one Deployment, StatefulSet, DaemonSet, CronJob or Job.
type Workload struct {
	Kind string
	Meta metav1.Object
	// Template is the pod template it rolls out (a Rollout with
	// spec.workloadRef: its Deployment's); Spec is Template's spec.
	Template *corev1.PodTemplateSpec
	Spec     *corev1.PodSpec
	// Resource is a custom kind's (a Rollout's); nil for the built-in kinds.
	Resource *schema.GroupVersionResource
}

// WorkloadOf wraps a typed workload object (Spec is nil for any other object).
func WorkloadOf(obj metav1.Object) Workload {
	kind, t := workload.Of(obj)
	if t == nil || kind == workload.Job && workload.Controlled(obj) {
		return Workload{} // a Job with a controller (a CronJob): that is the workload
	}
	return Workload{Kind: kind, Meta: obj, Template: t, Spec: &t.Spec}
}

// SecretHash and ConfigMapHash are the content hashes courier stamps on
// replicas of a source: over the keys its courier.dev/replicate-keys lists.
func SecretHash(s *corev1.Secret) string {
	spec, _ := source.Parse(s.Annotations) // an invalid spec is reported as the source's problem
	return content.Hash(spec.Entries(content.Entries(s)))
}

// ConfigMapHash: see SecretHash.
func ConfigMapHash(cm *corev1.ConfigMap) string {
	spec, _ := source.Parse(cm.Annotations)
	return content.Hash(spec.Entries(content.Entries(cm)))
}

// Build computes the report.
func Build(c Cluster, o Options) Report {
	byName := map[string]Object{} // kind/namespace/name
	for _, obj := range c.Objects {
		byName[objKey(obj.Kind, obj.Meta.GetNamespace(), obj.Meta.GetName())] = obj
	}
	var r Report
	for _, obj := range c.Objects {
		if o.roleOf(obj.Meta).Pushes {
			r.Sources = append(r.Sources, build(obj, c, byName, o))
		}
	}
	slices.SortFunc(r.Sources, func(a, b Source) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	return r
}

func build(src Object, c Cluster, byName map[string]Object, o Options) Source {
	m := src.Meta
	a := m.GetAnnotations()
	s := Source{Kind: src.Kind, Namespace: m.GetNamespace(), Name: m.GetName(), Selector: a[wellknown.ReplicateTo],
		Keys: a[wellknown.ReplicateKeys], CopyLabels: a[wellknown.CopyLabels], CopyAnnotations: a[wellknown.CopyAnnotations], Consumers: []Consumer{}}
	ref := s.Ref()
	targets, err := source.TargetsOf(a, o.Compat)
	if err == nil && !targets.Native() {
		s.Via = targets.Via
		s.Selector = compatSelector(a, targets.Via)
	}
	spec, specErr := source.Parse(a)
	switch {
	case o.roleOf(m).Problem == role.SourceNotAllowed:
		s.Problem = "namespace not in --source-namespaces; ignored"
	case err != nil:
		s.Problem = "invalid selector: " + err.Error()
	case specErr != nil:
		s.Problem = "invalid annotation: " + specErr.Error()
	}
	want := replica.Want{Hash: src.Hash, Copied: spec.Copied(m.GetLabels(), a), Via: s.Via}
	replicaNamespaces := map[string]bool{}
	if s.Problem == "" {
		for i := range c.Namespaces {
			ns := &c.Namespaces[i]
			if ns := namespaces.From(ns); !replica.Eligible(ns, s.Namespace, o.ExcludeNamespaces) || !targets.Matches(ns) {
				continue
			}
			s.Targets++
			// Secrets and ConfigMaps are read as metadata only: what a
			// replica holds is taken to be what courier stamped on it.
			var obj metav1.Object
			var held string
			if got, ok := byName[objKey(s.Kind, ns.Name, s.Name)]; ok {
				obj, held = got.Meta, got.Meta.GetAnnotations()[wellknown.ContentHash]
				if held == replica.Stamp(want.Hash, want.Via, want.Copied) {
					held = want.Hash // the stamp says it holds the source's content
				}
			}
			switch replica.Classify(o.Installation, ref, want, obj, held) {
			case replica.Missing:
				s.Error++
			case replica.Foreign, replica.OtherSources:
				s.Conflict++
			case replica.InSync:
				s.InSync++
				replicaNamespaces[ns.Name] = true
			case replica.Stale:
				s.Error++
				replicaNamespaces[ns.Name] = true
			}
		}
	}
	s.Consumers = consumersOf(c, o, s.Kind, s.Name, func(ns string) bool { return ns == s.Namespace || replicaNamespaces[ns] })
	return s
}

// consumersOf is the workloads in the namespaces in selects that consume
// the Secret or ConfigMap kind of that name there, sorted.
func consumersOf(c Cluster, o Options, kind, name string, in func(namespace string) bool) []Consumer {
	out := []Consumer{}
	for _, w := range c.Workloads {
		ns := w.Meta.GetNamespace()
		if !in(ns) {
			continue
		}
		a := w.Meta.GetAnnotations()
		var template map[string]string
		if w.Template != nil {
			template = w.Template.Annotations
		}
		for _, ref := range workload.WithNamed(inputs.Of(w.Spec), a, template) {
			if ref.Kind != kind || ref.Name != name || (ref.Named != "" && ref.Named != wellknown.ReloadOn && !o.Compat.Reloader) {
				continue
			}
			out = append(out, Consumer{
				Kind: w.Kind, Namespace: ns, Name: w.Meta.GetName(), Input: ns + "/" + ref.Name, NamedBy: ref.Named,
				NotifyOnly: o.NotifyOnly || a[wellknown.Reload] == wellknown.ReloadNotify,
				ReloadedAt: a[wellknown.ReloadedAt], ReloadedFor: a[wellknown.ReloadedFor],
			})
			break
		}
	}
	slices.SortFunc(out, func(a, b Consumer) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

func objKey(kind, ns, name string) string { return kind + "/" + ns + "/" + name }

// compatSelector is the value of the other tool's annotation(s) via names.
func compatSelector(a map[string]string, via string) string {
	var out []string
	for _, k := range strings.Split(via, ", ") {
		if v, ok := a[k]; ok {
			out = append(out, strings.TrimSpace(v))
		}
	}
	return strings.Join(out, "; ")
}
