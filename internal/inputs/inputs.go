// Package inputs says what a pod template consumes: which Secrets and
// ConfigMaps, which of their keys, and whether each reference is optional. It
// is pure: no cache, no API. The informers index workloads by it and the
// reloader hashes exactly what it returns.
package inputs

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Ref is one consumed Secret, ConfigMap or (through the Secrets Store CSI
// driver) SecretProviderClass in the workload's namespace.
type Ref struct {
	Kind string // wellknown.KindSecret, KindConfigMap or KindSecretProviderClass
	Name string
	// Keys consumed; nil means every key (envFrom, a whole volume).
	Keys []string
	// Optional is true only if every reference to the object is optional.
	Optional bool
	// Named is the annotation that makes the object an input although the
	// pod template does not reference it (courier.dev/reload-on, or one of
	// Reloader's reload lists): the workload reads it some other way (the
	// API, a sidecar), so it is read whole, and its absence holds nothing
	// up. "" for what the template references.
	Named string
}

// ID is "secret/<name>", "configmap/<name>" or "secretproviderclass/<name>",
// the form of courier.dev/reload-on.
func (r Ref) ID() string { return strings.ToLower(r.Kind) + "/" + r.Name }

// All reports whether every key is consumed.
func (r Ref) All() bool { return r.Keys == nil }

// Of returns what spec consumes, one Ref per object, sorted by ID: env
// keyRefs (one key), envFrom (every key), and secret, configMap and projected
// volumes (the listed items, or every key) of containers and initContainers,
// and the Secrets Store CSI driver's volumes (their SecretProviderClass,
// whole and optional).
func Of(spec *corev1.PodSpec) []Ref {
	acc := map[string]*Ref{}
	add := func(kind, name string, keys []string, all bool, optional *bool) {
		if name == "" {
			return
		}
		id := kind + "/" + name
		r, ok := acc[id]
		if !ok {
			r = &Ref{Kind: kind, Name: name, Keys: []string{}, Optional: true}
			acc[id] = r
		}
		r.Optional = r.Optional && optional != nil && *optional
		if all || r.Keys == nil {
			r.Keys = nil
			return
		}
		r.Keys = append(r.Keys, keys...)
	}
	containers := append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...)
	for _, c := range containers {
		for _, e := range c.Env {
			if e.ValueFrom == nil {
				continue
			}
			if s := e.ValueFrom.SecretKeyRef; s != nil {
				add(wellknown.KindSecret, s.Name, []string{s.Key}, false, s.Optional)
			}
			if cm := e.ValueFrom.ConfigMapKeyRef; cm != nil {
				add(wellknown.KindConfigMap, cm.Name, []string{cm.Key}, false, cm.Optional)
			}
		}
		for _, ef := range c.EnvFrom {
			if s := ef.SecretRef; s != nil {
				add(wellknown.KindSecret, s.Name, nil, true, s.Optional)
			}
			if cm := ef.ConfigMapRef; cm != nil {
				add(wellknown.KindConfigMap, cm.Name, nil, true, cm.Optional)
			}
		}
	}
	for _, v := range spec.Volumes {
		if s := v.Secret; s != nil {
			add(wellknown.KindSecret, s.SecretName, itemKeys(s.Items), len(s.Items) == 0, s.Optional)
		}
		if cm := v.ConfigMap; cm != nil {
			add(wellknown.KindConfigMap, cm.Name, itemKeys(cm.Items), len(cm.Items) == 0, cm.Optional)
		}
		if c := v.CSI; c != nil && c.Driver == wellknown.CSIDriver {
			// What the driver mounted: every object of the class, as the
			// driver reports their versions. Optional: the reports exist
			// only once pods mount it, and never hold a rollout up.
			add(wellknown.KindSecretProviderClass, c.VolumeAttributes["secretProviderClass"], nil, true, ptr.To(true))
		}
		if p := v.Projected; p != nil {
			for _, src := range p.Sources {
				if s := src.Secret; s != nil {
					add(wellknown.KindSecret, s.Name, itemKeys(s.Items), len(s.Items) == 0, s.Optional)
				}
				if cm := src.ConfigMap; cm != nil {
					add(wellknown.KindConfigMap, cm.Name, itemKeys(cm.Items), len(cm.Items) == 0, cm.Optional)
				}
			}
		}
	}
	out := make([]Ref, 0, len(acc))
	for _, r := range acc {
		if r.Keys != nil {
			sort.Strings(r.Keys)
			r.Keys = dedupe(r.Keys)
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}

func itemKeys(items []corev1.KeyToPath) []string {
	out := make([]string, 0, len(items))
	for _, it := range items {
		out = append(out, it.Key)
	}
	return out
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// ParseReloadOn parses courier.dev/reload-on, "secret/a, configmap/b", into
// IDs. Kinds are case-insensitive. Entries that are not kind/name are
// returned as an error naming them; the valid ones are still returned.
func ParseReloadOn(s string) (map[string]bool, error) {
	ids := map[string]bool{}
	var bad []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		kind, name, ok := strings.Cut(part, "/")
		kind = strings.ToLower(strings.TrimSpace(kind))
		name = strings.TrimSpace(name)
		if !ok || name == "" || strings.Contains(name, "/") || (kind != "secret" && kind != "configmap" && kind != "secretproviderclass") {
			bad = append(bad, part)
			continue
		}
		ids[kind+"/"+name] = true
	}
	if len(bad) > 0 {
		return ids, fmt.Errorf("%s entries %q are not \"secret/<name>\", \"configmap/<name>\" or \"secretproviderclass/<name>\"", wellknown.ReloadOn, bad)
	}
	return ids, nil
}

// RefOf is the Ref of every key of the object id names (as Ref.ID gives it).
func RefOf(id string) Ref {
	kind, name, _ := strings.Cut(id, "/")
	switch kind {
	case "configmap":
		return Ref{Kind: wellknown.KindConfigMap, Name: name}
	case "secretproviderclass":
		return Ref{Kind: wellknown.KindSecretProviderClass, Name: name, Optional: true}
	}
	return Ref{Kind: wellknown.KindSecret, Name: name}
}

// RefsOf is what courier.dev/reload-on names, as Refs of every key, sorted
// by ID; entries that are not kind/name are left out (ParseReloadOn names
// them).
func RefsOf(reloadOn string) []Ref {
	ids, _ := ParseReloadOn(reloadOn)
	out := make([]Ref, 0, len(ids))
	for id := range ids {
		out = append(out, RefOf(id))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID() < out[j].ID() })
	return out
}
