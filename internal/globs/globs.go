// Package globs matches namespace names against comma-separated shell globs,
// the form of --source-namespaces and --exclude-namespaces.
package globs

import (
	"fmt"
	"path"
	"strings"
)

// List is a parsed, comma-separated list of globs. The zero List matches
// nothing.
type List []string

// Parse splits s on commas, trims blanks and drops empty entries. A pattern
// that path.Match cannot parse is an error naming it.
func Parse(s string) (List, error) {
	var l List
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("glob %q: %w", p, err)
		}
		l = append(l, p)
	}
	return l, nil
}

// Match reports whether name matches any glob in l.
func (l List) Match(name string) bool {
	for _, p := range l {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// String is the list as it was given, normalised.
func (l List) String() string { return strings.Join(l, ",") }
