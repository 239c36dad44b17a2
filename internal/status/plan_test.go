package status

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestPlanTarget(t *testing.T) {
	for arg, want := range map[string][2]string{
		"secret/db": {"Secret", "db"}, "Secret/db": {"Secret", "db"}, "configmap/app": {"ConfigMap", "app"}, "cm/app": {"ConfigMap", "app"},
		"deployment/web": {}, "secret/": {}, "db": {},
	} {
		kind, name, err := planTarget(arg)
		if got := [2]string{kind, name}; got != want || (err != nil) != (want == [2]string{}) {
			t.Errorf("planTarget(%q) = %v, %v; want %v", arg, got, err, want)
		}
	}
}

// TestPlanTable is the golden record of courier plan's table.
func TestPlanTable(t *testing.T) {
	p := Plan{Kind: "Secret", Namespace: "src", Name: "ca", Replicas: []string{"a", "b"},
		Waves: []PlanWave{
			{Wave: 0, Workloads: []Consumer{{Kind: "Deployment", Namespace: "a", Name: "web", Input: "a/ca"}}},
			{Wave: 2, Workloads: []Consumer{{Kind: "StatefulSet", Namespace: "b", Name: "db", Input: "b/ca"}}},
		},
		NotRolledOut: []Consumer{{Kind: "Deployment", Namespace: "b", Name: "told", Input: "b/ca",
			Verdict: &Verdict{Verdict: "notifies", Message: "secret/ca changed: courier tells of the rollout and makes none (courier.dev/reload=notify)"}}},
	}
	var b bytes.Buffer
	if err := p.WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	want := `A change of Secret src/ca now (a source: its replicas in a, b change with it):

Wave 0 rolls out at once:
  Deployment a/web  (a/ca)

Wave 2 rolls out once wave 0 is healthy on it:
  StatefulSet b/db  (b/ca)

Not rolled out:
  Deployment b/told  notifies: secret/ca changed: courier tells of the rollout and makes none (courier.dev/reload=notify)

Nothing was written. It follows the settings courier published (courier-settings); a budget (--reload-max-in-flight) may space the rollouts further.
`
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
