package reloader

import (
	"regexp"
	"strings"

	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Stakater Reloader's annotations, honoured with --compat=reloader the way
// Reloader reads them (its ShouldReload): see docs/migrating.md.
const (
	StakaterAuto   = "reloader.stakater.com/auto"
	StakaterSearch = "reloader.stakater.com/search"
	StakaterMatch  = "reloader.stakater.com/match"
	StakaterIgnore = "reloader.stakater.com/ignore"
)

// stakaterPrefix is "secret" or "configmap": the first label of Reloader's
// per-kind keys.
func stakaterPrefix(kind string) string {
	if kind == wellknown.KindSecret {
		return "secret"
	}
	return "configmap"
}

func StakaterTypedAuto(kind string) string {
	return stakaterPrefix(kind) + ".reloader.stakater.com/auto"
}
func StakaterTypedReload(kind string) string {
	return stakaterPrefix(kind) + ".reloader.stakater.com/reload"
}
func StakaterExclude(kind string) string {
	return stakaterPrefix(kind) + "s.exclude.reloader.stakater.com/reload"
}

// StakaterVerdict is what Reloader's annotations say of one consumed input.
type StakaterVerdict int

const (
	StakaterSilent  StakaterVerdict = iota // they say nothing
	StakaterReload                         // they opt the workload in for it
	StakaterBlocked                        // they keep --reload-all from covering it
)

// StakaterAnnotations picks the annotations Reloader reads a workload's
// opt-ins from, for inputs of kind: the workload's own when any of the four
// opt-in keys is there, else its pod template's (all or nothing, per kind).
func StakaterAnnotations(kind string, workload, template map[string]string) map[string]string {
	for _, k := range []string{StakaterTypedReload(kind), StakaterSearch, StakaterAuto, StakaterTypedAuto(kind)} {
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
func Stakater(kind, name string, workload, template map[string]string, input func(key string) string, reloadAll bool) (v StakaterVerdict, badPatterns []string) {
	if input(StakaterIgnore) == "true" {
		return StakaterBlocked, nil
	}
	for _, ex := range strings.Split(workload[StakaterExclude(kind)], ",") {
		if strings.TrimSpace(ex) == name {
			return StakaterBlocked, nil
		}
	}
	a := StakaterAnnotations(kind, workload, template)
	listed := false
	for _, item := range strings.Split(a[StakaterTypedReload(kind)], ",") {
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
	if listed || (a[StakaterSearch] == "true" && input(StakaterMatch) == "true") {
		return StakaterReload, badPatterns
	}
	auto, typed := a[StakaterAuto], a[StakaterTypedAuto(kind)]
	if source.IsTrue(auto) || source.IsTrue(typed) {
		return StakaterReload, badPatterns
	}
	if reloadAll && (auto != "" || typed != "") {
		// Reloader's --auto-reload-all skips a workload whose auto is
		// anything but empty or true.
		return StakaterBlocked, badPatterns
	}
	return StakaterSilent, badPatterns
}

// stakaterKeys are the workload annotations whose change makes the reloader
// look at a workload again, for both kinds.
var stakaterKeys = []string{
	StakaterAuto, StakaterSearch,
	StakaterTypedAuto(wellknown.KindSecret), StakaterTypedReload(wellknown.KindSecret), StakaterExclude(wellknown.KindSecret),
	StakaterTypedAuto(wellknown.KindConfigMap), StakaterTypedReload(wellknown.KindConfigMap), StakaterExclude(wellknown.KindConfigMap),
}

// changed reports whether a and b differ at any of keys.
func changed(a, b map[string]string, keys []string) bool {
	for _, k := range keys {
		if a[k] != b[k] {
			return true
		}
	}
	return false
}
