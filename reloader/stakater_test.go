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
		want                      StakaterVerdict
	}{
		{"auto", wellknown.KindSecret, "db", map[string]string{StakaterAuto: "true"}, none, none, false, StakaterReload},
		{"auto as ParseBool reads it", wellknown.KindSecret, "db", map[string]string{StakaterAuto: "True"}, none, none, false, StakaterReload},
		{"typed auto for its kind", wellknown.KindConfigMap, "cfg", map[string]string{"configmap.reloader.stakater.com/auto": "true"}, none, none, false, StakaterReload},
		{"typed auto for the other kind", wellknown.KindSecret, "db", map[string]string{"configmap.reloader.stakater.com/auto": "true"}, none, none, false, StakaterSilent},
		{"named list, anchored regexes", wellknown.KindSecret, "db-prod", map[string]string{"secret.reloader.stakater.com/reload": "x, db-.*"}, none, none, false, StakaterReload},
		{"named list does not match a substring", wellknown.KindSecret, "my-db", map[string]string{"secret.reloader.stakater.com/reload": "db"}, none, none, false, StakaterSilent},
		{"auto false does not stop the list", wellknown.KindSecret, "db", map[string]string{StakaterAuto: "false", "secret.reloader.stakater.com/reload": "db"}, none, none, false, StakaterReload},
		{"search and match", wellknown.KindSecret, "db", map[string]string{StakaterSearch: "true"}, none, map[string]string{StakaterMatch: "true"}, false, StakaterReload},
		{"search without match", wellknown.KindSecret, "db", map[string]string{StakaterSearch: "true"}, none, none, false, StakaterSilent},
		{"ignore on the input", wellknown.KindSecret, "db", map[string]string{StakaterAuto: "true"}, none, map[string]string{StakaterIgnore: "true"}, false, StakaterBlocked},
		{"exclude list", wellknown.KindSecret, "db", map[string]string{StakaterAuto: "true", "secrets.exclude.reloader.stakater.com/reload": "other, db"}, none, none, false, StakaterBlocked},
		{"template when the workload has none", wellknown.KindSecret, "db", none, map[string]string{StakaterAuto: "true"}, none, false, StakaterReload},
		{"workload keys hide the template's", wellknown.KindSecret, "db", map[string]string{StakaterSearch: "false"}, map[string]string{StakaterAuto: "true"}, none, false, StakaterSilent},
		{"auto false opts out of reload-all", wellknown.KindSecret, "db", map[string]string{StakaterAuto: "false"}, none, none, true, StakaterBlocked},
		{"silent under reload-all", wellknown.KindSecret, "db", none, none, none, true, StakaterSilent},
		{"an empty auto is no opt-out of reload-all", wellknown.KindSecret, "db", map[string]string{StakaterAuto: ""}, none, none, true, StakaterSilent},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := Stakater(tt.kind, tt.input, tt.workload, tt.template, func(k string) string { return tt.annot[k] }, tt.reloadAll)
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	v, bad := Stakater(wellknown.KindSecret, "db", map[string]string{"secret.reloader.stakater.com/reload": "db, db["}, none, func(string) string { return "" }, false)
	if v != StakaterReload || len(bad) != 1 || bad[0] != "db[" {
		t.Errorf("got %v, bad patterns %v; want a reload, and [db[] reported though an earlier item matched", v, bad)
	}
}
