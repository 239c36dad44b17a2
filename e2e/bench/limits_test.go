package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadChartLimits(t *testing.T) {
	// The shipped chart: what -chart-limits runs courier under.
	got, err := readChartLimits("../../charts/courier/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got.GoMemLimit != "400MiB" || got.LimitBytes != 512<<20 {
		t.Errorf("the chart's limits read as %+v, want GOMEMLIMIT 400MiB under 512 MiB", got)
	}

	dir := t.TempDir()
	for name, values := range map[string]string{
		"requests' memory is not the limit": "resources:\n  requests:\n    memory: 128Mi\n",
		"no goMemLimit":                     "resources:\n  limits:\n    memory: 1Gi\n",
		"an invalid quantity":               "goMemLimit: 1GiB\nresources:\n  limits:\n    memory: lots\n",
	} {
		path := filepath.Join(dir, "values.yaml")
		if err := os.WriteFile(path, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		if l, err := readChartLimits(path); err == nil {
			t.Errorf("%s: read %+v, want an error", name, l)
		}
	}
}
