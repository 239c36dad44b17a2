package source

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// The other tools' annotations courier reads with --compat (see
// docs/migrating.md for what each means there and here).
const (
	MittwaldPrefix                = "replicator.v1.mittwald.de/"
	MittwaldReplicateTo           = MittwaldPrefix + "replicate-to"
	MittwaldReplicateToMatching   = MittwaldPrefix + "replicate-to-matching"
	MittwaldReplicateFrom         = MittwaldPrefix + "replicate-from"
	MittwaldAllowed               = MittwaldPrefix + "replication-allowed"
	MittwaldAllowedNamespaces     = MittwaldPrefix + "replication-allowed-namespaces"
	MittwaldReplicatedFromVersion = MittwaldPrefix + "replicated-from-version"

	ReflectorPrefix            = "reflector.v1.k8s.emberstack.com/"
	ReflectorAllowed           = ReflectorPrefix + "reflection-allowed"
	ReflectorAllowedNamespaces = ReflectorPrefix + "reflection-allowed-namespaces"
	ReflectorAutoEnabled       = ReflectorPrefix + "reflection-auto-enabled"
	ReflectorAutoNamespaces    = ReflectorPrefix + "reflection-auto-namespaces"
	// The selectors: a namespace matches the list or the selector.
	ReflectorAllowedSelector = ReflectorPrefix + "reflection-allowed-namespaces-selector"
	ReflectorAutoSelector    = ReflectorPrefix + "reflection-auto-namespaces-selector"
	ReflectorReflects        = ReflectorPrefix + "reflects"
	ReflectorAutoReflects    = ReflectorPrefix + "auto-reflects"
)

// Targets says which namespaces a source wants replicas in. The namespace
// rules every source obeys (Eligible) are the caller's.
type Targets struct {
	// Via names the annotation(s) that make the object a source.
	Via   string
	match func(ns *namespaces.Namespace) bool
}

// Matches reports whether the source wants a replica in ns.
func (t Targets) Matches(ns *namespaces.Namespace) bool { return t.match(ns) }

// Native reports whether courier's own courier.dev/replicate-to made it a source.
func (t Targets) Native() bool { return t.Via == wellknown.ReplicateTo }

// IsSource reports whether annotations make an object a source: courier's
// replicate-to, or, with compat, another tool's push annotations.
func IsSource(annotations map[string]string, compat Compat) bool {
	if _, ok := annotations[wellknown.ReplicateTo]; ok {
		return true
	}
	_, to := annotations[MittwaldReplicateTo]
	_, matching := annotations[MittwaldReplicateToMatching]
	return (compat.Replicator && (to || matching)) ||
		(compat.Reflector && isDotNetTrue(annotations[ReflectorAllowed]) && isDotNetTrue(annotations[ReflectorAutoEnabled]))
}

// AllowsPulls reports whether annotations let targets pull from the object
// (another tool's pull permission, with compat).
func AllowsPulls(annotations map[string]string, compat Compat) bool {
	return (compat.Replicator && IsTrue(annotations[MittwaldAllowed])) || (compat.Reflector && isDotNetTrue(annotations[ReflectorAllowed]))
}

// TargetsOf reads where a source's replicas go. courier's own replicate-to
// wins over the other tools' annotations; of those, kubernetes-replicator's
// win over Reflector's. An invalid value is an error naming it.
func TargetsOf(annotations map[string]string, compat Compat) (Targets, error) {
	if expr, ok := annotations[wellknown.ReplicateTo]; ok {
		sel, err := ParseSelector(expr)
		if err != nil {
			return Targets{}, fmt.Errorf("%s=%q is not a valid namespace label selector: %w. Use kubectl -l syntax, e.g. \"env in (prod,staging),team!=legacy\", or \"*\" for every namespace", wellknown.ReplicateTo, expr, err)
		}
		return Targets{Via: wellknown.ReplicateTo, match: func(ns *namespaces.Namespace) bool { return sel.Matches(ns.Labels()) }}, nil
	}
	to, hasTo := annotations[MittwaldReplicateTo]
	matching, hasMatching := annotations[MittwaldReplicateToMatching]
	if compat.Replicator && (hasTo || hasMatching) {
		var via []string
		names := func(string) bool { return false }
		sel := labels.Nothing()
		if hasTo {
			via = append(via, MittwaldReplicateTo)
			res, err := patterns(MittwaldReplicateTo, to, mittwaldPattern)
			if err != nil {
				return Targets{}, err
			}
			names = anyMatch(res)
		}
		if hasMatching {
			via = append(via, MittwaldReplicateToMatching)
			var err error
			if sel, err = labels.Parse(strings.TrimSpace(matching)); err != nil {
				return Targets{}, fmt.Errorf("%s=%q is not a valid namespace label selector: %w", MittwaldReplicateToMatching, matching, err)
			}
		}
		return Targets{Via: strings.Join(via, ", "), match: func(ns *namespaces.Namespace) bool {
			return names(ns.GetName()) || sel.Matches(ns.Labels())
		}}, nil
	}
	if compat.Reflector && isDotNetTrue(annotations[ReflectorAllowed]) && isDotNetTrue(annotations[ReflectorAutoEnabled]) {
		allowed, err := reflectorNamespaces(annotations, ReflectorAllowedNamespaces, ReflectorAllowedSelector)
		if err != nil {
			return Targets{}, err
		}
		auto, err := reflectorNamespaces(annotations, ReflectorAutoNamespaces, ReflectorAutoSelector)
		if err != nil {
			return Targets{}, err
		}
		return Targets{Via: ReflectorAutoEnabled, match: func(ns *namespaces.Namespace) bool { return allowed(ns) && auto(ns) }}, nil
	}
	return Targets{}, fmt.Errorf("not a source")
}

// ParseSelector parses courier.dev/replicate-to: "*" or blank is every namespace.
func ParseSelector(s string) (labels.Selector, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "*" {
		return labels.Everything(), nil
	}
	return labels.Parse(s)
}

// PullAllowed reports whether a source with annotations lets a target in
// namespace ns pull from it through tool's annotation (via), and if not, why.
func PullAllowed(annotations map[string]string, via string, ns *namespaces.Namespace) (bool, string) {
	namespace := ns.GetName()
	switch via {
	case MittwaldReplicateFrom:
		if !IsTrue(annotations[MittwaldAllowed]) {
			return false, fmt.Sprintf("the source lacks %s: \"true\"", MittwaldAllowed)
		}
		v, ok := annotations[MittwaldAllowedNamespaces]
		if !ok {
			return false, fmt.Sprintf("the source lacks %s (kubernetes-replicator denies pulls without it)", MittwaldAllowedNamespaces)
		}
		res, err := patterns(MittwaldAllowedNamespaces, v, mittwaldPattern)
		if err != nil {
			return false, err.Error()
		}
		if !anyMatch(res)(namespace) {
			return false, fmt.Sprintf("the source's %s=%q does not match namespace %s", MittwaldAllowedNamespaces, v, namespace)
		}
	case ReflectorReflects:
		if !isDotNetTrue(annotations[ReflectorAllowed]) {
			return false, fmt.Sprintf("the source lacks %s: \"true\"", ReflectorAllowed)
		}
		allowed, err := reflectorNamespaces(annotations, ReflectorAllowedNamespaces, ReflectorAllowedSelector)
		if err != nil {
			return false, err.Error()
		}
		if !allowed(ns) {
			return false, fmt.Sprintf("the source's %s=%q and %s=%q do not match namespace %s", ReflectorAllowedNamespaces, annotations[ReflectorAllowedNamespaces],
				ReflectorAllowedSelector, annotations[ReflectorAllowedSelector], namespace)
		}
	default:
		return false, "unknown pull annotation " + via
	}
	return true, ""
}

// PullFrom reads a pull target's annotations: the source it pulls from
// ("namespace/name") and the annotation that says so ("" when it pulls
// from nothing under compat). A bare Reflector name means the target's own
// namespace.
func PullFrom(annotations map[string]string, namespace string, compat Compat) (ref, via string) {
	if v, ok := annotations[MittwaldReplicateFrom]; ok && compat.Replicator {
		return strings.TrimSpace(v), MittwaldReplicateFrom
	}
	if v, ok := annotations[ReflectorReflects]; ok && compat.Reflector {
		v = strings.TrimSpace(v)
		if !strings.Contains(v, "/") {
			v = namespace + "/" + v
		}
		return v, ReflectorReflects
	}
	return "", ""
}

// mittwaldPattern anchors an item as kubernetes-replicator does: ^ and $
// are added unless already there.
func mittwaldPattern(item string) string {
	if !strings.HasPrefix(item, "^") {
		item = "^" + item
	}
	if !strings.HasSuffix(item, "$") {
		item += "$"
	}
	return item
}

// reflectorPattern makes an item match whole names only, as Reflector
// requires of its matches.
func reflectorPattern(item string) string { return "^(?:" + item + ")$" }

func patterns(annotation, v string, anchor func(string) string) ([]*regexp.Regexp, error) {
	var out []*regexp.Regexp
	for _, item := range Items(v) {
		re, err := regexp.Compile(anchor(item))
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %q is not a valid regular expression: %w", annotation, v, item, err)
		}
		out = append(out, re)
	}
	return out, nil
}

func anyMatch(res []*regexp.Regexp) func(string) bool {
	return func(name string) bool {
		for _, re := range res {
			if re.MatchString(name) {
				return true
			}
		}
		return false
	}
}

// reflectorList reads a Reflector namespace list: missing or empty allows
// every namespace; otherwise (even a list of only commas or blanks) the
// items.
func reflectorList(annotation, v string) (func(string) bool, error) {
	if v == "" {
		return func(string) bool { return true }, nil
	}
	res, err := patterns(annotation, v, reflectorPattern)
	if err != nil {
		return nil, err
	}
	return anyMatch(res), nil
}

// reflectorNamespaces reads one of Reflector's namespace sets: its name list
// (listKey) or its label selector (selectorKey) matches; with neither (or
// both empty), every namespace.
func reflectorNamespaces(annotations map[string]string, listKey, selectorKey string) (func(*namespaces.Namespace) bool, error) {
	list, sel := annotations[listKey], strings.TrimSpace(annotations[selectorKey])
	if sel == "" {
		names, err := reflectorList(listKey, list)
		if err != nil {
			return nil, err
		}
		return func(ns *namespaces.Namespace) bool { return names(ns.GetName()) }, nil
	}
	selector, err := labels.Parse(sel)
	if err != nil {
		return nil, fmt.Errorf("%s=%q is not a valid namespace label selector: %w", selectorKey, sel, err)
	}
	names := func(string) bool { return false }
	if list != "" {
		if names, err = reflectorList(listKey, list); err != nil {
			return nil, err
		}
	}
	return func(ns *namespaces.Namespace) bool { return names(ns.GetName()) || selector.Matches(ns.Labels()) }, nil
}

// IsTrue reads a boolean as kubernetes-replicator and Stakater Reloader do
// (Go's strconv.ParseBool: "true", "1", "t", "TRUE", "True", "T").
func IsTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// isDotNetTrue reads a boolean as Reflector does (.NET's bool.TryParse:
// "true" in any case, surrounding blanks allowed).
func isDotNetTrue(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// CopiedBy names the other tool whose pushed copy an object is, from the
// annotations that tool writes on its copies ("" for none): a
// kubernetes-replicator copy that is not a pull target, or one of
// Reflector's automatic mirrors. Objects users made to pull are not copies.
func CopiedBy(annotations map[string]string) string {
	_, version := annotations[MittwaldReplicatedFromVersion]
	_, pulls := annotations[MittwaldReplicateFrom]
	switch {
	case version && !pulls:
		return "kubernetes-replicator"
	case annotations[ReflectorAutoReflects] == "True":
		return "Reflector"
	}
	return ""
}
