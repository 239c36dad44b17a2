package reloader

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// Stakater Reloader's annotations, honoured with --compat=reloader the way
// Reloader reads them (its ShouldReload): see docs/migrating.md.
const (
	stakaterAuto   = "reloader.stakater.com/auto"
	stakaterSearch = "reloader.stakater.com/search"
	stakaterMatch  = "reloader.stakater.com/match"
	stakaterIgnore = "reloader.stakater.com/ignore"
)

// stakaterPrefix is "secret" or "configmap": the first label of Reloader's
// per-kind keys.
func stakaterPrefix(kind string) string {
	if kind == wellknown.KindSecret {
		return "secret"
	}
	return "configmap"
}

func stakaterTypedAuto(kind string) string {
	return stakaterPrefix(kind) + ".reloader.stakater.com/auto"
}
func stakaterTypedReload(kind string) string {
	return stakaterPrefix(kind) + ".reloader.stakater.com/reload"
}
func stakaterExclude(kind string) string {
	return stakaterPrefix(kind) + "s.exclude.reloader.stakater.com/reload"
}

// stakaterVerdict is what Reloader's annotations say of one consumed input.
type stakaterVerdict int

const (
	stakaterSilent  stakaterVerdict = iota // they say nothing
	stakaterReload                         // they opt the workload in for it
	stakaterBlocked                        // they keep --reload-all from covering it
)

// stakaterAnnotations picks the annotations Reloader reads a workload's
// opt-ins from, for inputs of kind: the workload's own when any of the four
// opt-in keys is there, else its pod template's (all or nothing, per kind).
func stakaterAnnotations(kind string, workload, template map[string]string) map[string]string {
	for _, k := range []string{stakaterTypedReload(kind), stakaterSearch, stakaterAuto, stakaterTypedAuto(kind)} {
		if _, ok := workload[k]; ok {
			return workload
		}
	}
	return template
}

// stakater decides for the input kind/name (whose annotations, or its
// source's for a replica, are input; nil when it does not exist) what
// Reloader's annotations on the workload (workload, template) say. Items of
// a reload list that are not valid regular expressions are returned, so the
// caller can report them.
func stakater(kind, name string, workload, template map[string]string, input func(key string) string, reloadAll bool) (v stakaterVerdict, badPatterns []string) {
	if input(stakaterIgnore) == "true" {
		return stakaterBlocked, nil
	}
	for _, ex := range strings.Split(workload[stakaterExclude(kind)], ",") {
		if strings.TrimSpace(ex) == name {
			return stakaterBlocked, nil
		}
	}
	a := stakaterAnnotations(kind, workload, template)
	for _, item := range strings.Split(a[stakaterTypedReload(kind)], ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		re, err := regexp.Compile("^" + item + "$")
		if err != nil {
			badPatterns = append(badPatterns, item)
			continue
		}
		if re.MatchString(name) {
			return stakaterReload, badPatterns
		}
	}
	if a[stakaterSearch] == "true" && input(stakaterMatch) == "true" {
		return stakaterReload, badPatterns
	}
	auto, autoSet := a[stakaterAuto]
	typed, typedSet := a[stakaterTypedAuto(kind)]
	if isTrue(auto) || isTrue(typed) {
		return stakaterReload, badPatterns
	}
	if reloadAll && (autoSet || typedSet) {
		// Reloader's --auto-reload-all skips a workload whose auto is set
		// to anything but true.
		return stakaterBlocked, badPatterns
	}
	return stakaterSilent, badPatterns
}

// isTrue reads a boolean as Reloader does (strconv.ParseBool).
func isTrue(v string) bool {
	b, err := strconv.ParseBool(v)
	return err == nil && b
}

// stakaterKeys are the workload annotations whose change makes the reloader
// look at a workload again, for both kinds.
var stakaterKeys = []string{
	stakaterAuto, stakaterSearch,
	stakaterTypedAuto(wellknown.KindSecret), stakaterTypedReload(wellknown.KindSecret), stakaterExclude(wellknown.KindSecret),
	stakaterTypedAuto(wellknown.KindConfigMap), stakaterTypedReload(wellknown.KindConfigMap), stakaterExclude(wellknown.KindConfigMap),
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
