package workload

import (
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Rollouts is Argo Rollouts' Rollout: courier reads its pod template
// (spec.template) as it reads a Deployment's, or, with spec.workloadRef, the
// referenced Deployment's.
var Rollouts = schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}

// Rollout is how courier names Rollouts' kind (Custom.Name).
const Rollout = "Rollout.argoproj.io"

// defaultPath is where a custom kind gets courier.dev/config-hash unless a
// field path is given: its own metadata annotations.
var defaultPath = []string{"metadata", "annotations"}

// Resource is a kind of custom resource listed in --reload-resources:
// "rollouts.argoproj.io", or "<plural>.<group>" with an optional
// ":<field path>" of the annotations map that gets courier.dev/config-hash.
type Resource struct {
	schema.GroupResource
	// Path is the field path of the map that gets courier.dev/config-hash
	// (for Rollouts, the pod template's annotations).
	Path []string
}

// String is the resource as --reload-resources takes it.
func (r Resource) String() string {
	if r.GroupResource == Rollouts || slices.Equal(r.Path, defaultPath) {
		return r.GroupResource.String()
	}
	return r.GroupResource.String() + ":" + strings.Join(r.Path, ".")
}

// HasTemplate reports whether courier reads the kind's pod template
// (Rollouts); every other custom kind says what it consumes in
// courier.dev/reload-on.
func (r Resource) HasTemplate() bool { return r.GroupResource == Rollouts }

// ParseResource reads one item of --reload-resources.
func ParseResource(s string) (Resource, error) {
	name, path, hasPath := strings.Cut(strings.TrimSpace(s), ":")
	plural, group, ok := strings.Cut(name, ".")
	if !ok || len(validation.IsDNS1123Label(plural)) > 0 || len(validation.IsDNS1123Subdomain(group)) > 0 {
		return Resource{}, fmt.Errorf("%q is not <plural>.<group> (e.g. rollouts.argoproj.io or harborclusters.goharbor.io), the name of a CustomResourceDefinition", name)
	}
	r := Resource{GroupResource: schema.GroupResource{Group: group, Resource: plural}, Path: defaultPath}
	if r.GroupResource == Rollouts {
		r.Path = HashPath(Deployment)
		if hasPath {
			return Resource{}, fmt.Errorf("%s takes no field path: courier writes courier.dev/config-hash into the Rollout's pod template, as for a Deployment", Rollouts)
		}
		return r, nil
	}
	if hasPath {
		r.Path = strings.Split(path, ".")
		for _, p := range r.Path {
			if p == "" {
				return Resource{}, fmt.Errorf("%s: the field path %q has an empty part; give it as JSON field names joined by dots, e.g. spec.template.metadata.annotations", name, path)
			}
		}
		if (r.Path[0] == "metadata" && path != "metadata.annotations") || r.Path[0] == "status" || r.Path[0] == "apiVersion" || r.Path[0] == "kind" {
			return Resource{}, fmt.Errorf("%s: the field path %q is not a map courier may write the hash into: give one under spec (or none, for metadata.annotations)", name, path)
		}
	}
	return r, nil
}

// Resources is the value of --reload-resources: comma-separated, repeatable.
type Resources []Resource

func (rs *Resources) String() string {
	var out []string
	for _, r := range *rs {
		out = append(out, r.String())
	}
	return strings.Join(out, ",")
}

// Set adds the resources in s.
func (rs *Resources) Set(s string) error {
	for _, item := range strings.Split(s, ",") {
		if strings.TrimSpace(item) == "" {
			continue
		}
		r, err := ParseResource(item)
		if err != nil {
			return err
		}
		for _, have := range *rs {
			if have.GroupResource == r.GroupResource {
				return fmt.Errorf("%s is listed twice", r.GroupResource)
			}
		}
		*rs = append(*rs, r)
	}
	return nil
}

// Custom is a Resource as the API server serves it: the version courier
// watches and the kind's name.
type Custom struct {
	Resource
	Version string
	Kind    string
}

// GVR is the group, version and resource to watch and patch.
func (c Custom) GVR() schema.GroupVersionResource { return c.GroupResource.WithVersion(c.Version) }

// Name is how courier names the kind, in its work queue, logs, metrics and
// notifications: <Kind>.<group>, as kubectl does (Rollout.argoproj.io), so
// kinds of the same name in two groups never meet, nor one of a built-in
// kind's name.
func (c Custom) Name() string { return c.Kind + "." + c.Group }

// Object is a workload as courier's cache holds it, built-in or custom: its
// metadata (annotations, without kubectl's last-applied configuration) and
// what the reloader reads. Nothing else of the object is kept: a pod
// template is read once, into its annotations and its inputs, so the cache
// holds no pod spec.
type Object struct {
	metav1.TypeMeta
	// Meta is its metadata without labels (objmeta: compact, strings
	// shared); Generation is kept beside it (GetGeneration).
	objmeta.Meta
	Generation int64
	// Templated: the kind's inputs are what its pod template consumes
	// (built-in kinds and Rollouts), not what courier.dev/reload-on names.
	Templated bool
	// TemplateAnnotations are the pod template's annotations (nil without a
	// template), as Pairs: read them through the package's TemplateAnnotations.
	TemplateAnnotations objmeta.Pairs
	// Refs is what the pod template consumes (inputs.Of); nil for other kinds,
	// for a Rollout with spec.workloadRef, and for one courier cannot read.
	Refs []inputs.Ref
	// WorkloadRef is the Deployment a Rollout takes its template from, and
	// WorkloadGeneration the generation of it the Rollout's controller has
	// rolled out (status.workloadObservedGeneration; 0: none).
	WorkloadRef        string
	WorkloadGeneration int64
	// Hash is courier.dev/config-hash where the kind keeps it.
	Hash string
	// TemplateSum fingerprints the pod template as its owner wrote it:
	// every field but courier.dev/config-hash, so it changes when someone
	// else changes the template and never for courier's own rollouts (0
	// without a template).
	TemplateSum uint64
	// Finished: a Job that is Complete or Failed.
	Finished bool
	// Controlled: a Job with a controller (a CronJob that started it);
	// it has no inputs and the cache keeps nothing of its template.
	Controlled bool
	// NeverStarted: a Job that has not started (suspended since its
	// creation).
	NeverStarted bool
	// Unreadable: courier could not read what it needs (ObjectOf says why);
	// the object has no inputs, so it is never reloaded.
	Unreadable bool
	// Health is what its status says of its latest pod template.
	Health Health
}

// DeepCopyObject copies o.
func (o *Object) DeepCopyObject() runtime.Object {
	c := *o
	c.Meta = o.Meta.DeepCopy()
	c.TemplateAnnotations = slices.Clone(o.TemplateAnnotations)
	if o.Refs != nil {
		c.Refs = make([]inputs.Ref, len(o.Refs))
		for i, r := range o.Refs {
			r.Keys = slices.Clone(r.Keys)
			c.Refs[i] = r
		}
	}
	return &c
}

// KindName is the kind's name: a built-in kind's (Deployment), or a custom
// kind's Custom.Name.
func (o *Object) KindName() string {
	if g := o.GroupVersionKind().Group; g != "apps" && g != "batch" {
		return o.Kind + "." + g
	}
	return o.Kind
}

// Cached is a built-in workload (Deployment, StatefulSet, DaemonSet,
// CronJob, Job) as courier's cache holds it; false for any other object.
func Cached(obj any) (*Object, bool) {
	kind, t := Of(obj)
	m, ok := obj.(metav1.Object)
	if t == nil || !ok {
		return nil, false
	}
	group := "apps/v1"
	if kind == CronJob || kind == Job {
		group = "batch/v1"
	}
	o := &Object{TypeMeta: metav1.TypeMeta{APIVersion: group, Kind: kind}, Meta: metaOf(m), Generation: m.GetGeneration(), Templated: true, Health: HealthOf(obj)}
	if kind == Job {
		o.Finished, o.NeverStarted = Finished(obj), NeverStarted(obj)
		if o.Controlled = Controlled(m); o.Controlled {
			return o, true
		}
	}
	o.setTemplate(t)
	return o, true
}

func (o *Object) setTemplate(t *corev1.PodTemplateSpec) {
	o.TemplateAnnotations, o.Refs = objmeta.PairsOf(t.Annotations), inputs.Of(&t.Spec)
	o.Hash, _ = o.TemplateAnnotations.Get(wellknown.ConfigHash)
	o.TemplateSum = templateSum(t)
}

// templateSum is TemplateSum of t.
func templateSum(t *corev1.PodTemplateSpec) uint64 {
	// A shallow copy: only its annotations are replaced. (Marshal may cache
	// a Quantity's string form in t; t is the transform's own, fresh from
	// the decoder.)
	c := *t
	if _, ok := c.Annotations[wellknown.ConfigHash]; ok {
		c.Annotations = maps.Clone(c.Annotations)
		delete(c.Annotations, wellknown.ConfigHash)
	}
	b, err := c.Marshal() // deterministic: map keys sorted
	if err != nil {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64() | 1 // never 0, which means no template
}

// metaOf is the metadata an Object keeps of m: no labels, no kubectl
// last-applied configuration.
func metaOf(m metav1.Object) objmeta.Meta {
	out := metav1.ObjectMeta{
		Name: m.GetName(), Namespace: m.GetNamespace(), UID: m.GetUID(), ResourceVersion: m.GetResourceVersion(),
		CreationTimestamp: m.GetCreationTimestamp(), DeletionTimestamp: m.GetDeletionTimestamp(),
		Annotations: m.GetAnnotations(),
	}
	if _, ok := out.Annotations[corev1.LastAppliedConfigAnnotation]; ok {
		// A copy: m may share its map with the decoder's copy.
		out.Annotations = maps.Clone(out.Annotations)
		delete(out.Annotations, corev1.LastAppliedConfigAnnotation)
	}
	return objmeta.From(&out, true)
}

// GetGeneration is the object's metadata.generation.
func (o *Object) GetGeneration() int64 { return o.Generation }

// SetGeneration sets it.
func (o *Object) SetGeneration(g int64) { o.Generation = g }

// ObjectOf reads a custom resource of kind c into an Object. What it cannot
// read it says in the error, and leaves out of the Object, which then has no
// inputs (it is never reloaded) but is still an Object.
func ObjectOf(c Custom, u *unstructured.Unstructured) (*Object, error) {
	o := &Object{
		Templated:  c.HasTemplate(),
		TypeMeta:   metav1.TypeMeta{APIVersion: c.GVR().GroupVersion().String(), Kind: c.Kind},
		Meta:       metaOf(u),
		Generation: u.GetGeneration(),
	}
	if !c.HasTemplate() {
		// Every step of the path that exists must be a map: a merge patch
		// through a list or a value would replace it.
		var node any = u.Object
		for i, field := range c.Path {
			m, ok := node.(map[string]any)
			if !ok {
				o.Unreadable = true
				return o, fmt.Errorf("%s %s/%s: %s is not a map, so courier writes no hash there and does not reload it; give --reload-resources a field path to a map", c.Name(), o.GetNamespace(), o.GetName(), strings.Join(c.Path[:i], "."))
			}
			if node, ok = m[field]; !ok {
				break
			}
		}
		if m, ok := node.(map[string]any); ok {
			o.Hash, _ = m[wellknown.ConfigHash].(string)
		} else if node != nil {
			o.Unreadable = true
			return o, fmt.Errorf("%s %s/%s: %s is not a map, so courier writes no hash there and does not reload it; give --reload-resources a field path to a map", c.Name(), o.GetNamespace(), o.GetName(), strings.Join(c.Path, "."))
		}
		return o, nil
	}
	o.Health = rolloutHealth(u)
	if ref, ok, _ := unstructured.NestedMap(u.Object, "spec", "workloadRef"); ok {
		if ref["kind"] != Deployment {
			o.Unreadable = true
			return o, fmt.Errorf("%s %s/%s: spec.workloadRef names a %v; courier reloads Rollouts whose template is their own or a Deployment's, so it is not reloaded", c.Name(), o.GetNamespace(), o.GetName(), ref["kind"])
		}
		o.WorkloadRef, _ = ref["name"].(string)
		if g, _, _ := unstructured.NestedString(u.Object, "status", "workloadObservedGeneration"); g != "" {
			o.WorkloadGeneration, _ = strconv.ParseInt(g, 10, 64)
		}
		return o, nil
	}
	t, ok, _ := unstructured.NestedMap(u.Object, "spec", "template")
	if !ok {
		return o, nil
	}
	tmpl := &corev1.PodTemplateSpec{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(t, tmpl); err != nil {
		o.Unreadable = true
		return o, fmt.Errorf("%s %s/%s: spec.template is not a pod template, so it is not reloaded: %w", c.Name(), o.GetNamespace(), o.GetName(), err)
	}
	o.setTemplate(tmpl)
	return o, nil
}
