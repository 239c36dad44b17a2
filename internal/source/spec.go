// Package source reads what a source's annotations ask of its replicas
// beyond where they go: which keys they hold (courier.dev/replicate-keys) and
// which of the source's labels and annotations they carry
// (courier.dev/copy-labels, courier.dev/copy-annotations). The replicator
// writes by it and `courier status` judges replicas by it.
package source

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Spec is what a source asks of its replicas. The zero Spec copies every key
// and no metadata.
type Spec struct {
	// Keys are the keys a replica holds; nil means every key.
	Keys []string
	// Labels and Annotations say which of the source's are copied.
	Labels, Annotations Copy
}

// Copy is a parsed copy list: exact keys, and prefixes (from "prefix/*").
type Copy struct {
	exact    map[string]bool
	prefixes []string
}

// Error is an invalid value of one of the annotations Parse reads.
type Error struct {
	Annotation, Value, Problem string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s=%q: %s", e.Annotation, e.Value, e.Problem)
}

// Parse reads the Spec from a source's annotations. An invalid value is an
// *Error naming the annotation, what is wrong and how to write it instead.
func Parse(annotations map[string]string) (Spec, error) {
	var s Spec
	if v, ok := annotations[wellknown.ReplicateKeys]; ok {
		keys, err := parseKeys(v)
		if err != nil {
			return Spec{}, err
		}
		s.Keys = keys
	}
	for _, c := range []struct {
		annotation string
		into       *Copy
	}{{wellknown.CopyLabels, &s.Labels}, {wellknown.CopyAnnotations, &s.Annotations}} {
		v, ok := annotations[c.annotation]
		if !ok {
			continue
		}
		parsed, err := parseCopy(c.annotation, v)
		if err != nil {
			return Spec{}, err
		}
		*c.into = parsed
	}
	return s, nil
}

// Items splits a comma-separated list, trimming blanks and dropping empty
// items.
func Items(v string) []string {
	var out []string
	for _, it := range strings.Split(v, ",") {
		if it = strings.TrimSpace(it); it != "" {
			out = append(out, it)
		}
	}
	return out
}

func parseKeys(v string) ([]string, error) {
	keys := Items(v)
	if len(keys) == 0 {
		return nil, &Error{wellknown.ReplicateKeys, v, `lists no key; list the keys to copy, e.g. "ca.crt, tls.crt", or remove the annotation to copy every key`}
	}
	for _, k := range keys {
		if errs := validation.IsConfigMapKey(k); len(errs) > 0 {
			return nil, &Error{wellknown.ReplicateKeys, v, fmt.Sprintf("%q is not a valid Secret or ConfigMap key (%s)", k, strings.Join(errs, "; "))}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys), nil
}

func parseCopy(annotation, v string) (Copy, error) {
	c := Copy{}
	if len(Items(v)) == 0 {
		return Copy{}, &Error{annotation, v, "lists no key; list the keys to copy, e.g. argocd.argoproj.io/secret-type or example.com/*, or remove the annotation"}
	}
	for _, it := range Items(v) {
		bad := func(problem string) (Copy, error) {
			return Copy{}, &Error{annotation, v, fmt.Sprintf("%q %s; list exact keys such as argocd.argoproj.io/secret-type, or prefixes such as example.com/*", it, problem)}
		}
		if prefix, ok := strings.CutSuffix(it, "/*"); ok {
			if errs := validation.IsDNS1123Subdomain(prefix); len(errs) > 0 {
				return bad("is not a valid prefix (" + strings.Join(errs, "; ") + ")")
			}
			if reservedPrefix(prefix) {
				return bad("names courier's own keys, which are never copied")
			}
			if otherToolPrefix(prefix) {
				return bad("names another replication tool's keys, which are never copied (a copy carrying them would be a source or a pull target itself)")
			}
			c.prefixes = append(c.prefixes, prefix+"/")
			continue
		}
		if errs := validation.IsQualifiedName(it); len(errs) > 0 {
			return bad("is not a valid key (" + strings.Join(errs, "; ") + ")")
		}
		if reserved(it) {
			return bad("is a key courier sets or strips itself, which is never copied")
		}
		if c.exact == nil {
			c.exact = map[string]bool{}
		}
		c.exact[it] = true
	}
	return c, nil
}

// reservedPrefix: courier.dev/ and its subdomains (cache.courier.dev/).
func reservedPrefix(prefix string) bool {
	d := strings.TrimSuffix(wellknown.Prefix, "/")
	return prefix == d || strings.HasSuffix(prefix, "."+d)
}

// otherToolPrefix: kubernetes-replicator's and Reflector's keys.
func otherToolPrefix(prefix string) bool {
	return prefix+"/" == MittwaldPrefix || prefix+"/" == ReflectorPrefix
}

// reserved keys are never copied: courier's own, kubernetes-replicator's
// and Reflector's, the managed-by label courier's replicas carry, and
// kubectl's copy of the whole applied object.
func reserved(key string) bool {
	return ToolKey(key) || key == wellknown.ManagedBy || key == corev1.LastAppliedConfigAnnotation
}

// ToolKey reports whether a label or annotation key is courier's
// (courier.dev/ and its subdomains), kubernetes-replicator's or Reflector's.
func ToolKey(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	return found && (reservedPrefix(prefix) || otherToolPrefix(prefix))
}

// Empty reports whether c copies nothing.
func (c Copy) Empty() bool { return len(c.exact) == 0 && len(c.prefixes) == 0 }

// Matches reports whether c copies key.
func (c Copy) Matches(key string) bool {
	if reserved(key) {
		return false
	}
	if c.exact[key] {
		return true
	}
	for _, p := range c.prefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return false
}

// pick returns the entries of m that c copies (nil for none).
func (c Copy) pick(m map[string]string) map[string]string {
	var out map[string]string
	if c.Empty() {
		return nil
	}
	for k, v := range m {
		if c.Matches(k) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

// Holds reports whether a replica holds key.
func (s Spec) Holds(key string) bool {
	if s.Keys == nil {
		return true
	}
	_, found := slices.BinarySearch(s.Keys, key)
	return found
}

// Entries returns the entries of all that a replica holds.
func (s Spec) Entries(all []content.Entry) []content.Entry {
	if s.Keys == nil {
		return all
	}
	out := make([]content.Entry, 0, len(s.Keys))
	for _, e := range all {
		if s.Holds(e.Key) {
			out = append(out, e)
		}
	}
	return out
}

// requiredKeys are the keys the API server requires of a Secret of each
// type (its validation): a replica holding only some keys keeps its source's
// type only when the list keeps these.
var requiredKeys = map[corev1.SecretType][]string{
	corev1.SecretTypeTLS:              {corev1.TLSCertKey, corev1.TLSPrivateKeyKey},
	corev1.SecretTypeSSHAuth:          {corev1.SSHAuthPrivateKey},
	corev1.SecretTypeDockerConfigJson: {corev1.DockerConfigJsonKey},
	corev1.SecretTypeDockercfg:        {corev1.DockerConfigKey},
}

// requiredOneOf are the keys of which the API server requires at least one
// of a Secret of each type.
var requiredOneOf = map[corev1.SecretType][]string{
	corev1.SecretTypeBasicAuth: {corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey},
}

// Type is the type of a replica of a Secret of type typ ("" for a
// ConfigMap): the source's, unless the listed keys leave out a key that
// type requires (replicate-keys "ca.crt, tls.crt" on a kubernetes.io/tls
// source); then Opaque, for the API server refuses the source's type
// without that key, and courier never copies an unlisted key to satisfy it.
func (s Spec) Type(typ corev1.SecretType) corev1.SecretType {
	for _, k := range requiredKeys[typ] {
		if !s.Holds(k) {
			return corev1.SecretTypeOpaque
		}
	}
	if oneOf := requiredOneOf[typ]; len(oneOf) > 0 && !slices.ContainsFunc(oneOf, s.Holds) {
		return corev1.SecretTypeOpaque
	}
	return typ
}

// Missing returns the listed keys that has says the source does not have.
func (s Spec) Missing(has func(key string) bool) []string {
	var out []string
	for _, k := range s.Keys {
		if !has(k) {
			out = append(out, k)
		}
	}
	return out
}

// SecretData and ConfigMapData return the content a replica holds (the
// source's maps themselves when every key is copied; never modified).
func (s Spec) SecretData(data map[string][]byte) map[string][]byte { return pickKeys(s, data) }

// ConfigMapData: see SecretData.
func (s Spec) ConfigMapData(data map[string]string) map[string]string { return pickKeys(s, data) }

func pickKeys[V any](s Spec, m map[string]V) map[string]V {
	if s.Keys == nil || m == nil {
		return m
	}
	out := map[string]V{}
	for k, v := range m {
		if s.Holds(k) {
			out[k] = v
		}
	}
	return out
}

// Record is the metadata courier copied onto a replica: kept on the replica
// in courier.dev/copied-metadata, so courier can tell its own copies from
// anyone else's labels, revert edits to them, and remove what the source no
// longer has.
type Record struct {
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Copied is the Record a replica of a source with these labels and
// annotations carries.
func (s Spec) Copied(labels, annotations map[string]string) Record {
	return Record{Labels: s.Labels.pick(labels), Annotations: s.Annotations.pick(annotations)}
}

// With adds to r the values labels has of keys (the keys of
// --resource-label-selector: a replica carries its source's, so it is
// cached whenever its source is). r is not modified.
func (r Record) With(labels map[string]string, keys []string) Record {
	out := Record{Labels: maps.Clone(r.Labels), Annotations: r.Annotations}
	for _, k := range keys {
		if v, ok := labels[k]; ok {
			if out.Labels == nil {
				out.Labels = map[string]string{}
			}
			out.Labels[k] = v
		}
	}
	return out
}

// Encode is the annotation's value: "" when nothing is copied; otherwise
// JSON with sorted keys, so equal records encode equally.
func (r Record) Encode() string {
	if len(r.Labels) == 0 && len(r.Annotations) == 0 {
		return ""
	}
	b, _ := json.Marshal(r) // maps of strings always marshal
	return string(b)
}

// RecordOf reads the Record a replica carries (empty when it has none or
// the value does not parse: then nothing is taken for courier's copy).
func RecordOf(annotations map[string]string) Record {
	var r Record
	if v := annotations[wellknown.CopiedMetadata]; v != "" {
		if json.Unmarshal([]byte(v), &r) != nil {
			return Record{}
		}
	}
	return r
}

// Carried reports whether labels and annotations hold every entry of r.
func (r Record) Carried(labels, annotations map[string]string) bool {
	return contains(labels, r.Labels) && contains(annotations, r.Annotations)
}

func contains(m, sub map[string]string) bool {
	for k, v := range sub {
		if got, ok := m[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Apply writes want onto a replica's labels and annotations (both owned by
// the caller), removing what the replica's previous record copied first.
func Apply(labels, annotations map[string]string, previous, want Record) {
	for k := range previous.Labels {
		delete(labels, k)
	}
	for k := range previous.Annotations {
		delete(annotations, k)
	}
	maps.Copy(labels, want.Labels)
	maps.Copy(annotations, want.Annotations)
	delete(annotations, wellknown.CopiedMetadata)
	if v := want.Encode(); v != "" {
		annotations[wellknown.CopiedMetadata] = v
	}
}
