// Package version says which courier this is: the version and revision make
// stamps in, else what Go recorded in the build info (the module version of
// `go install …@vX.Y.Z`, the VCS revision when built with -buildvcs), and the
// Go version.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Stamped by make (-ldflags -X, see the Makefile's LDFLAGS).
var version, revision string

// Info is what a courier binary knows of its own build.
type Info struct {
	Version   string // "0.1.0", or "dev" for an unstamped local build
	Revision  string // the commit, "-dirty" appended for a modified checkout; "unknown" if neither make nor Go recorded it
	GoVersion string
}

// Get is this binary's Info.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(version, revision, bi)
}

func fromBuild(stampedVersion, stampedRevision string, bi *debug.BuildInfo) Info {
	i := Info{Version: stampedVersion, Revision: stampedRevision, GoVersion: runtime.Version()}
	if bi == nil {
		bi = &debug.BuildInfo{}
	}
	if bi.GoVersion != "" {
		i.GoVersion = bi.GoVersion
	}
	if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		i.Version = strings.TrimPrefix(bi.Main.Version, "v")
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	if i.Revision == "" {
		dirty := ""
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision":
				i.Revision = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				dirty = "-dirty"
			}
		}
		if i.Revision != "" {
			i.Revision += dirty
		}
	}
	if i.Revision == "" {
		i.Revision = "unknown"
	}
	return i
}

// String is the line `courier version` prints.
func (i Info) String() string {
	return fmt.Sprintf("courier %s (revision %s, %s)", i.Version, i.Revision, i.GoVersion)
}
