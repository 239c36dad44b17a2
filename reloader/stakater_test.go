package reloader

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
		want                      stakaterVerdict
	}{
		{"auto", wellknown.KindSecret, "db", map[string]string{stakaterAuto: "true"}, none, none, false, stakaterReload},
		{"auto as ParseBool reads it", wellknown.KindSecret, "db", map[string]string{stakaterAuto: "True"}, none, none, false, stakaterReload},
		{"typed auto for its kind", wellknown.KindConfigMap, "cfg", map[string]string{"configmap.reloader.stakater.com/auto": "true"}, none, none, false, stakaterReload},
		{"typed auto for the other kind", wellknown.KindSecret, "db", map[string]string{"configmap.reloader.stakater.com/auto": "true"}, none, none, false, stakaterSilent},
		{"named list, anchored regexes", wellknown.KindSecret, "db-prod", map[string]string{"secret.reloader.stakater.com/reload": "x, db-.*"}, none, none, false, stakaterReload},
		{"named list does not match a substring", wellknown.KindSecret, "my-db", map[string]string{"secret.reloader.stakater.com/reload": "db"}, none, none, false, stakaterSilent},
		{"auto false does not stop the list", wellknown.KindSecret, "db", map[string]string{stakaterAuto: "false", "secret.reloader.stakater.com/reload": "db"}, none, none, false, stakaterReload},
		{"search and match", wellknown.KindSecret, "db", map[string]string{stakaterSearch: "true"}, none, map[string]string{stakaterMatch: "true"}, false, stakaterReload},
		{"search without match", wellknown.KindSecret, "db", map[string]string{stakaterSearch: "true"}, none, none, false, stakaterSilent},
		{"ignore on the input", wellknown.KindSecret, "db", map[string]string{stakaterAuto: "true"}, none, map[string]string{stakaterIgnore: "true"}, false, stakaterBlocked},
		{"exclude list", wellknown.KindSecret, "db", map[string]string{stakaterAuto: "true", "secrets.exclude.reloader.stakater.com/reload": "other, db"}, none, none, false, stakaterBlocked},
		{"template when the workload has none", wellknown.KindSecret, "db", none, map[string]string{stakaterAuto: "true"}, none, false, stakaterReload},
		{"workload keys hide the template's", wellknown.KindSecret, "db", map[string]string{stakaterSearch: "false"}, map[string]string{stakaterAuto: "true"}, none, false, stakaterSilent},
		{"auto false opts out of reload-all", wellknown.KindSecret, "db", map[string]string{stakaterAuto: "false"}, none, none, true, stakaterBlocked},
		{"silent under reload-all", wellknown.KindSecret, "db", none, none, none, true, stakaterSilent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := stakater(tt.kind, tt.input, tt.workload, tt.template, func(k string) string { return tt.annot[k] }, tt.reloadAll)
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	_, bad := stakater(wellknown.KindSecret, "db", map[string]string{"secret.reloader.stakater.com/reload": "db[, ok"}, none, func(string) string { return "" }, false)
	if len(bad) != 1 || bad[0] != "db[" {
		t.Errorf("bad patterns = %v, want [db[]", bad)
	}
}
