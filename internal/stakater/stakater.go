// Package stakater reads Stakater Reloader's annotations as Reloader does
// (its ShouldReload), for the reloader under --compat=reloader and for
// `courier migrate`. It decides; it never reads the cluster.
package stakater

import (
	"regexp"
	"strings"

	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Stakater Reloader's annotations, honoured with --compat=reloader the way
// Reloader reads them (its ShouldReload): see docs/migrating.md.
const (
	Auto   = "reloader.stakater.com/auto"
	Search = "reloader.stakater.com/search"
	Match  = "reloader.stakater.com/match"
	Ignore = "reloader.stakater.com/ignore"
	// PausePeriod (on a Deployment): Reloader pauses the Deployment this
	// long after a reload, so changes within it coalesce; courier holds
	// the rollout itself for as long (courier.dev/reload-min-interval).
	PausePeriod = "deployment.reloader.stakater.com/pause-period"
)

// stakaterPrefix is "secret", "configmap" or "secretproviderclass": the
// first label of Reloader's per-kind keys.
func stakaterPrefix(kind string) string {
	switch kind {
	case wellknown.KindSecret:
		return "secret"
	case wellknown.KindSecretProviderClass:
		return "secretproviderclass"
	}
	return "configmap"
}

func TypedAuto(kind string) string {
	return stakaterPrefix(kind) + ".reloader.stakater.com/auto"
}
func TypedReload(kind string) string {
	return stakaterPrefix(kind) + ".reloader.stakater.com/reload"
}
func Exclude(kind string) string {
	return stakaterPrefix(kind) + "s.exclude.reloader.stakater.com/reload"
}

// Verdict is what Reloader's annotations say of one consumed input.
type Verdict int

const (
	Silent  Verdict = iota // they say nothing
	Reload                 // they opt the workload in for it
	Blocked                // they keep --reload-all from covering it
)

// Annotations picks the annotations Reloader reads a workload's
// opt-ins from, for inputs of kind: the workload's own when any of the four
// opt-in keys is there, else its pod template's (all or nothing, per kind).
func Annotations(kind string, workload, template map[string]string) map[string]string {
	for _, k := range []string{TypedReload(kind), Search, Auto, TypedAuto(kind)} {
		if _, ok := workload[k]; ok {
			return workload
		}
	}
	return template
}

// Stakater decides for the input kind/name (whose annotations, or its
// source's for a replica, are input; nil when it does not exist) what
// Reloader's annotations on the workload (workload, template) say. Items of
// a reload list that are not valid regular expressions are returned, so the
// caller can report them.
func Decide(kind, name string, workload, template map[string]string, input func(key string) string, reloadAll bool) (v Verdict, badPatterns []string) {
	if input(Ignore) == "true" {
		return Blocked, nil
	}
	for _, ex := range strings.Split(workload[Exclude(kind)], ",") {
		if strings.TrimSpace(ex) == name {
			return Blocked, nil
		}
	}
	a := Annotations(kind, workload, template)
	listed := false
	for _, item := range strings.Split(a[TypedReload(kind)], ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		re, err := regexp.Compile("^" + item + "$")
		if err != nil {
			badPatterns = append(badPatterns, item)
			continue
		}
		listed = listed || re.MatchString(name)
	}
	if listed || (a[Search] == "true" && input(Match) == "true") {
		return Reload, badPatterns
	}
	auto, typed := a[Auto], a[TypedAuto(kind)]
	if source.IsTrue(auto) || source.IsTrue(typed) {
		return Reload, badPatterns
	}
	if reloadAll && (auto != "" || typed != "") {
		// Reloader's --auto-reload-all skips a workload whose auto is
		// anything but empty or true.
		return Blocked, badPatterns
	}
	return Silent, badPatterns
}

// Keys are the workload annotations whose change makes the reloader
// look at a workload again, for every kind.
var Keys = []string{
	Auto, Search,
	TypedAuto(wellknown.KindSecret), TypedReload(wellknown.KindSecret), Exclude(wellknown.KindSecret),
	TypedAuto(wellknown.KindConfigMap), TypedReload(wellknown.KindConfigMap), Exclude(wellknown.KindConfigMap),
	TypedAuto(wellknown.KindSecretProviderClass), TypedReload(wellknown.KindSecretProviderClass), Exclude(wellknown.KindSecretProviderClass),
}
