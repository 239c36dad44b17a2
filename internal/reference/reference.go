// Package reference generates docs/reference.md from the code: the flags
// from courier's flag set, the labels, annotations and Event reasons from
// their constants' doc comments in internal/wellknown, and the metrics from
// what courier registers. `make docs` writes the file; `make lint` fails when
// it is stale, so a new flag, key, reason or metric cannot go undocumented.
package reference

import (
	"bytes"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"
)

//go:embed reference.md.tmpl
var page string

// Inputs is what the page is made from.
type Inputs struct {
	// Flags is courier's flag set; EnvName gives a flag's environment twin.
	Flags   *flag.FlagSet
	EnvName func(flag string) string
	// Wellknown is the directory of internal/wellknown's source.
	Wellknown string
	// Metrics are the metrics courier registers.
	Metrics []Metric
}

// Metric is one metric courier exports.
type Metric struct {
	Name, Type, Help string
	Labels           []string
}

// Generate returns docs/reference.md. It fails, naming the culprit, when a
// flag, key, reason or metric has no documentation.
func Generate(in Inputs) ([]byte, error) {
	consts, err := Consts(in.Wellknown)
	if err != nil {
		return nil, err
	}
	var errs []error
	flags, err := flagTable(in.Flags, in.EnvName)
	errs = append(errs, err)
	keys, err := keyTable(consts)
	errs = append(errs, err)
	reasons, err := reasonTable(consts)
	errs = append(errs, err)
	metrics, err := metricTable(in.Metrics)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	t := template.Must(template.New("reference.md").Delims("{{{", "}}}").Parse(page))
	if err := t.Execute(&out, map[string]string{"Flags": flags, "Keys": keys, "Reasons": reasons, "Metrics": metrics}); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Check reports whether the file at path holds want; the error says how to
// bring it up to date and where it first differs.
func Check(path string, want []byte) error {
	have, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%w; run make docs", err)
	}
	if bytes.Equal(have, want) {
		return nil
	}
	hl, wl := strings.Split(string(have), "\n"), strings.Split(string(want), "\n")
	i := 0
	for i < len(hl) && i < len(wl) && hl[i] == wl[i] {
		i++
	}
	line := func(ls []string) string {
		if i < len(ls) {
			return strconv.Quote(ls[i])
		}
		return "end of file"
	}
	return fmt.Errorf("%s is stale: run make docs (line %d has %s; the code gives %s)", path, i+1, line(hl), line(wl))
}

// Const is one constant of a package, with its doc comment.
type Const struct {
	Name, Value, Doc string
}

// Consts reads the string constants of the Go package in dir, in source
// order. A constant without its own doc comment shares that of the one
// before it in its group (Go's way of documenting a group of names); one
// whose value is not a string literal, a constant or a sum of those is an
// error.
func Consts(dir string) ([]Const, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var specs []*ast.ValueSpec
	docs := map[*ast.ValueSpec]string{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		for _, d := range file.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			doc := ""
			for _, s := range g.Specs {
				v := s.(*ast.ValueSpec)
				if v.Doc != nil {
					doc = v.Doc.Text()
				}
				specs = append(specs, v)
				docs[v] = doc
			}
		}
	}
	values := map[string]string{}
	var eval func(ast.Expr) (string, bool)
	eval = func(e ast.Expr) (string, bool) {
		switch e := e.(type) {
		case *ast.BasicLit:
			s, err := strconv.Unquote(e.Value)
			return s, err == nil && e.Kind == token.STRING
		case *ast.Ident:
			s, ok := values[e.Name]
			return s, ok
		case *ast.BinaryExpr:
			a, ok1 := eval(e.X)
			b, ok2 := eval(e.Y)
			return a + b, ok1 && ok2 && e.Op == token.ADD
		case *ast.ParenExpr:
			return eval(e.X)
		}
		return "", false
	}
	var out []Const
	// Constants may name ones declared later: evaluate until nothing new.
	for pending := specs; len(pending) > 0; {
		var next []*ast.ValueSpec
		for _, v := range pending {
			ok := true
			for i, n := range v.Names {
				if i >= len(v.Values) {
					return nil, fmt.Errorf("%s: constant %s has no value of its own", dir, n.Name)
				}
				s, good := eval(v.Values[i])
				if !good {
					ok = false
					break
				}
				values[n.Name] = s
			}
			if !ok {
				next = append(next, v)
			}
		}
		if len(next) == len(pending) {
			return nil, fmt.Errorf("%s: constant %s is not a string made of literals and constants", dir, next[0].Names[0].Name)
		}
		pending = next
	}
	for _, v := range specs {
		for _, n := range v.Names {
			out = append(out, Const{Name: n.Name, Value: values[n.Name], Doc: docs[v]})
		}
	}
	return out, nil
}

// row is a documented name: "Name (what, on where): meaning", the form
// internal/wellknown's comments take for every key and Event reason.
var row = regexp.MustCompile(`(?s)^(\w+)(?:,? (?:and )?\w+)* \(([^,()]+), on ([^()]+)\):\s+(.+)$`)

// describe parses the doc comment of c, which must be in row's form and
// start with c's name or name it among the names it documents.
func describe(c Const) (what, on, meaning string, err error) {
	m := row.FindStringSubmatch(strings.TrimSpace(c.Doc))
	head, _, _ := strings.Cut(c.Doc, "(")
	if m == nil || !regexp.MustCompile(`\b`+c.Name+`\b`).MatchString(head) {
		return "", "", "", fmt.Errorf("internal/wellknown: %s (%q) needs a doc comment %q", c.Name, c.Value,
			c.Name+" (label|annotation|Warning|Normal, on <object>): <meaning>.")
	}
	return m[2], m[3], oneLine(m[4]), nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// cell escapes what would break a Markdown table cell.
func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

// keyTable lists every label and annotation key: the constants whose value
// is a key under courier.dev/, and the well-known ones courier sets.
func keyTable(consts []Const) (string, error) {
	var b strings.Builder
	var errs []error
	b.WriteString("| key | kind | on | meaning |\n|---|---|---|---|\n")
	prefix := ""
	for _, c := range consts {
		if c.Name == "Prefix" {
			prefix = c.Value
		}
	}
	for _, c := range consts {
		// courier's own keys must be documented; others are keys if their
		// comment says so.
		if !strings.HasPrefix(c.Value, prefix) || c.Value == prefix {
			if w, _, _, err := describe(c); err != nil || (w != "label" && w != "annotation") {
				continue
			}
		}
		what, on, meaning, err := describe(c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if what != "label" && what != "annotation" {
			errs = append(errs, fmt.Errorf("internal/wellknown: %s: %q is not label or annotation", c.Name, what))
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", c.Value, what, cell(on), cell(meaning))
	}
	return b.String(), errors.Join(errs...)
}

// reasonTable lists every Event reason: the constants named Reason….
func reasonTable(consts []Const) (string, error) {
	var b strings.Builder
	var errs []error
	b.WriteString("| reason | type | on | meaning, and what to do |\n|---|---|---|---|\n")
	for _, c := range consts {
		if !strings.HasPrefix(c.Name, "Reason") {
			continue
		}
		what, on, meaning, err := describe(c)
		if err == nil && what != "Warning" && what != "Normal" {
			err = fmt.Errorf("internal/wellknown: %s: Event type %q is not Warning or Normal", c.Name, what)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", c.Value, what, cell(on), cell(meaning))
	}
	return b.String(), errors.Join(errs...)
}

// defaultIn is a usage ending in "(default: …)".
var defaultIn = regexp.MustCompile(`^(.*?)\s*\(default: ([^()]*)\)$`)

// flagTable lists every flag of fs, in the order --help prints them.
func flagTable(fs *flag.FlagSet, envName func(string) string) (string, error) {
	var b strings.Builder
	var errs []error
	b.WriteString("| flag | environment | default | meaning |\n|---|---|---|---|\n")
	fs.VisitAll(func(f *flag.Flag) {
		if strings.TrimSpace(f.Usage) == "" {
			errs = append(errs, fmt.Errorf("flag --%s has no help text: give it one where it is defined (internal/config)", f.Name))
			return
		}
		def, usage := "`"+f.DefValue+"`", f.Usage
		if m := defaultIn.FindStringSubmatch(usage); m != nil {
			// A default the flag's value cannot hold ("--namespace"): the
			// usage says it, and the table shows it in its column.
			def, usage = m[2], m[1]
		} else if f.DefValue == "" || f.DefValue == "[]" {
			def = "none"
		}
		fmt.Fprintf(&b, "| `--%s` | `%s` | %s | %s |\n", f.Name, envName(f.Name), cell(def), cell(usage))
	})
	return b.String(), errors.Join(errs...)
}

// metricTable lists ms by name; the runtime's go_* and process_* are
// described once, in the page's text.
func metricTable(ms []Metric) (string, error) {
	ms = append([]Metric(nil), ms...)
	sort.Slice(ms, func(i, j int) bool { return ms[i].Name < ms[j].Name })
	var b strings.Builder
	var errs []error
	b.WriteString("| metric | type | labels | meaning |\n|---|---|---|---|\n")
	for _, m := range ms {
		if strings.HasPrefix(m.Name, "go_") || strings.HasPrefix(m.Name, "process_") {
			continue
		}
		if strings.TrimSpace(m.Help) == "" {
			errs = append(errs, fmt.Errorf("metric %s has no help text", m.Name))
			continue
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, strings.Join(m.Labels, ", "), cell(m.Help))
	}
	return b.String(), errors.Join(errs...)
}
