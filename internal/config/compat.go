package config

import (
	"fmt"
	"strings"
)

// Compat is --compat: the tools whose annotations courier also honours.
type Compat struct {
	// Reloader: Stakater Reloader's reloader.stakater.com annotations.
	Reloader bool
}

// String lists the tools, comma-separated.
func (c *Compat) String() string {
	var out []string
	if c.Reloader {
		out = append(out, "reloader")
	}
	return strings.Join(out, ",")
}

// Set parses a comma-separated list of tools.
func (c *Compat) Set(v string) error {
	*c = Compat{}
	for _, t := range strings.Split(v, ",") {
		switch strings.TrimSpace(t) {
		case "":
		case "reloader":
			c.Reloader = true
		default:
			return fmt.Errorf("unknown tool %q: courier honours the annotations of reloader (Stakater Reloader)", strings.TrimSpace(t))
		}
	}
	return nil
}
