package version

import (
	"runtime/debug"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFromBuild(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.modified", Value: "true"}}
	tests := []struct {
		name                       string
		stampedVersion, stampedRev string
		bi                         *debug.BuildInfo
		want                       Info
	}{
		{"stamped by make wins", "0.2.0", "def456", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.1.0"}, Settings: vcs},
			Info{Version: "0.2.0", Revision: "def456", GoVersion: "go1.99"}},
		{"go install at a tag", "", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "v0.1.0"}},
			Info{Version: "0.1.0", Revision: "unknown", GoVersion: "go1.99"}},
		{"go build of a modified checkout, -buildvcs", "", "", &debug.BuildInfo{GoVersion: "go1.99", Main: debug.Module{Version: "(devel)"}, Settings: vcs},
			Info{Version: "dev", Revision: "abc123-dirty", GoVersion: "go1.99"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, fromBuild(tt.stampedVersion, tt.stampedRev, tt.bi)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if got, want := (Info{Version: "0.1.0", Revision: "abc", GoVersion: "go1.99"}).String(), "courier 0.1.0 (revision abc, go1.99)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
