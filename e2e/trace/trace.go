// Package trace is the record of the soak's operations: one line per
// operation, which a failing soak writes whole and shortened to what its
// violations name, and which the soak replays (COURIER_SOAK_TRACE).
//
// A line is tab-separated: the time from the soak's start ("12.34s"; 0 for
// the namespaces made before courier starts), the operation, the namespace it
// acts on as the soak refers to it ("n3" for the fourth namespace the soak
// made, "src" and "src2" for the installations' source namespaces, "-" for
// none), its argument ("-" for none), and a comment from "#" on (the
// namespace's name in the run that made it).
package trace

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Op is one operation of the soak.
type Op struct {
	At   time.Duration // from the soak's start; 0: before courier started
	What string
	NS   string // "n<i>", "src", "src2" or "" (none)
	Arg  string
	Name string // the namespace's name where it was made (a comment)
}

// Global reports whether o acts on no namespace of its own (a fault, or a
// source's edit, which reaches every namespace).
func (o Op) Global() bool { return !strings.HasPrefix(o.NS, "n") }

func (o Op) String() string {
	dash := func(s string) string {
		if s == "" {
			return "-"
		}
		return s
	}
	line := fmt.Sprintf("%8.2fs\t%s\t%s\t%s", o.At.Seconds(), o.What, dash(o.NS), dash(o.Arg))
	if o.Name != "" {
		line += "\t# " + o.Name
	}
	return line
}

// Format is ops, a line each.
func Format(ops []Op) string {
	var b strings.Builder
	for _, o := range ops {
		b.WriteString(o.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Parse reads the lines Format writes; blank lines and lines starting with
// "#" are skipped.
func Parse(r io.Reader) ([]Op, error) {
	var ops []Op
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		line, comment, _ := strings.Cut(line, "#")
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) != 4 {
			return nil, fmt.Errorf("line %d: want 4 tab-separated fields (time, operation, namespace, argument), found %d: %q", n, len(f), line)
		}
		s, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(f[0]), "s"), 64)
		if err != nil || s < 0 {
			return nil, fmt.Errorf("line %d: time %q is not a number of seconds like 12.34s", n, f[0])
		}
		undash := func(s string) string {
			if s == "-" {
				return ""
			}
			return s
		}
		o := Op{At: time.Duration(s * float64(time.Second)), What: f[1], NS: undash(f[2]), Arg: undash(f[3]), Name: strings.TrimSpace(comment)}
		if o.NS != "" && o.NS != "src" && o.NS != "src2" {
			if i, err := strconv.Atoi(strings.TrimPrefix(o.NS, "n")); err != nil || i < 0 || !strings.HasPrefix(o.NS, "n") {
				return nil, fmt.Errorf("line %d: namespace %q is none of n<number>, src, src2 or -", n, f[2])
			}
		}
		ops = append(ops, o)
	}
	return ops, sc.Err()
}

// Shorten keeps of ops what can have led to violations that name the
// namespaces named (as ops refer to them) and happened by until (0:
// unknown): the namespaces made before courier started, every operation on
// a named namespace, and the global operations (faults, source edits) made
// within window before until. Operations after until are dropped. With no
// namespace named, only those after until are.
func Shorten(ops []Op, named map[string]bool, until, window time.Duration) []Op {
	var out []Op
	for _, o := range ops {
		switch {
		case until > 0 && o.At > until:
		case o.At == 0, len(named) == 0, named[o.NS]:
			out = append(out, o)
		case o.Global() && (until == 0 || o.At >= until-window):
			out = append(out, o)
		}
	}
	return slices.Clip(out)
}
