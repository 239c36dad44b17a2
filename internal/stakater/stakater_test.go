package stakater

import (
	"testing"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// TestStakaterReadsReloadersAnnotationsAsReloaderDoes checks the decision
// table of Reloader's ShouldReload (docs/research/incumbent-annotations.md §1.2).
func TestStakaterReadsReloadersAnnotationsAsReloaderDoes(t *testing.T) {
	none := map[string]string{}
	for _, tt := range []struct {
		name                      string
		kind, input               string
		workload, template, annot map[string]string
		reloadAll                 bool
		want                      Verdict
	}{
		{"auto", wellknown.KindSecret, "db", map[string]string{Auto: "true"}, none, none, false, Reload},
		{"auto as ParseBool reads it", wellknown.KindSecret, "db", map[string]string{Auto: "True"}, none, none, false, Reload},
		{"typed auto for its kind", wellknown.KindConfigMap, "cfg", map[string]string{"configmap.reloader.stakater.com/auto": "true"}, none, none, false, Reload},
		{"typed auto for the other kind", wellknown.KindSecret, "db", map[string]string{"configmap.reloader.stakater.com/auto": "true"}, none, none, false, Silent},
		{"named list, anchored regexes", wellknown.KindSecret, "db-prod", map[string]string{"secret.reloader.stakater.com/reload": "x, db-.*"}, none, none, false, Reload},
		{"named list does not match a substring", wellknown.KindSecret, "my-db", map[string]string{"secret.reloader.stakater.com/reload": "db"}, none, none, false, Silent},
		{"auto false does not stop the list", wellknown.KindSecret, "db", map[string]string{Auto: "false", "secret.reloader.stakater.com/reload": "db"}, none, none, false, Reload},
		{"search and match", wellknown.KindSecret, "db", map[string]string{Search: "true"}, none, map[string]string{Match: "true"}, false, Reload},
		{"search without match", wellknown.KindSecret, "db", map[string]string{Search: "true"}, none, none, false, Silent},
		{"ignore on the input", wellknown.KindSecret, "db", map[string]string{Auto: "true"}, none, map[string]string{Ignore: "true"}, false, Blocked},
		{"exclude list", wellknown.KindSecret, "db", map[string]string{Auto: "true", "secrets.exclude.reloader.stakater.com/reload": "other, db"}, none, none, false, Blocked},
		{"template when the workload has none", wellknown.KindSecret, "db", none, map[string]string{Auto: "true"}, none, false, Reload},
		{"workload keys hide the template's", wellknown.KindSecret, "db", map[string]string{Search: "false"}, map[string]string{Auto: "true"}, none, false, Silent},
		{"auto false opts out of reload-all", wellknown.KindSecret, "db", map[string]string{Auto: "false"}, none, none, true, Blocked},
		{"silent under reload-all", wellknown.KindSecret, "db", none, none, none, true, Silent},
		{"an empty auto is no opt-out of reload-all", wellknown.KindSecret, "db", map[string]string{Auto: ""}, none, none, true, Silent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := Decide(tt.kind, tt.input, tt.workload, tt.template, func(k string) string { return tt.annot[k] }, tt.reloadAll)
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	v, bad := Decide(wellknown.KindSecret, "db", map[string]string{"secret.reloader.stakater.com/reload": "db, db["}, none, func(string) string { return "" }, false)
	if v != Reload || len(bad) != 1 || bad[0] != "db[" {
		t.Errorf("got %v, bad patterns %v; want a reload, and [db[] reported though an earlier item matched", v, bad)
	}
}
