package source

import (
	"fmt"
	"strings"
)

// Compat is --compat: the other tools whose annotations courier also
// honours, with their meaning there as far as courier's rules allow.
type Compat struct {
	// Reloader: Stakater Reloader (reloader.stakater.com).
	Reloader bool
	// Replicator: mittwald kubernetes-replicator (replicator.v1.mittwald.de).
	Replicator bool
	// Reflector: EmberStack Reflector (reflector.v1.k8s.emberstack.com).
	Reflector bool
}

// Tools names every tool Compat knows, as --compat takes them.
var Tools = []string{"reloader", "replicator", "reflector"}

func (c *Compat) flag(tool string) *bool {
	switch tool {
	case "reloader":
		return &c.Reloader
	case "replicator":
		return &c.Replicator
	case "reflector":
		return &c.Reflector
	}
	return nil
}

// String lists the tools, comma-separated.
func (c *Compat) String() string {
	var out []string
	for _, t := range Tools {
		if *c.flag(t) {
			out = append(out, t)
		}
	}
	return strings.Join(out, ",")
}

// Set parses a comma-separated list of tools.
func (c *Compat) Set(v string) error {
	*c = Compat{}
	for _, t := range strings.Split(v, ",") {
		t = strings.TrimSpace(t)
		if t == "" {
			continue
		}
		f := c.flag(t)
		if f == nil {
			return fmt.Errorf("unknown tool %q: want any of %s", t, strings.Join(Tools, ", "))
		}
		*f = true
	}
	return nil
}
