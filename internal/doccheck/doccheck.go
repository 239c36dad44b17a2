// Package doccheck checks that what the project's Markdown names exists:
// every relative link resolves (to a file, and to a heading when it has an
// anchor), and every `make` target, repository path and Go test named in
// code (`…` or a fenced block) is there. `make lint` runs it, so docs
// cannot drift from a renamed target, a moved package or a deleted test.
package doccheck

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// Repo is what docs may name: read from a checkout by Load.
type Repo struct {
	Root string
	// Targets are the Makefile's targets; Tests the Test, Fuzz, Benchmark
	// and Example functions of every _test.go file.
	Targets, Tests map[string]bool
}

// Load reads root's Makefile targets and test functions.
func Load(root string) (*Repo, error) {
	r := &Repo{Root: root, Targets: map[string]bool{}, Tests: map[string]bool{}}
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return nil, err
	}
	for _, m := range regexp.MustCompile(`(?m)^([a-z][a-z0-9-]*):`).FindAllStringSubmatch(string(mk), -1) {
		r.Targets[m[1]] = true
	}
	testFunc := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark|Example)\w*)\(`)
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && skipDir(root, path) {
			return filepath.SkipDir
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			r.Tests[m[1]] = true
		}
		return nil
	})
	return r, err
}

// skipDir: what is not the project's own (build output, caches, git).
func skipDir(root, path string) bool {
	rel, _ := filepath.Rel(root, path)
	switch rel {
	case ".git", ".run", "bin", "dist", "node_modules":
		return true
	}
	return false
}

// Docs are the Markdown files of root that describe the project as it is
// (docs/research describes other projects, and CHANGELOG.md the project as
// it was: both are left out).
func Docs(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (skipDir(root, path) || filepath.Base(path) == "research") {
			return filepath.SkipDir
		}
		if strings.HasSuffix(path, ".md") && filepath.Base(path) != "CHANGELOG.md" {
			out = append(out, path)
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

var (
	link      = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLink   = regexp.MustCompile(`^\[[^\]]+\]:\s+(\S+)`)
	codeSpan  = regexp.MustCompile("`([^`]+)`")
	makeCall  = regexp.MustCompile(`(?:^|[\s;&|(])make((?:\s+[A-Z_]+=\S*)*)\s+([a-z][a-z0-9-]*)`)
	testName  = regexp.MustCompile(`\b((?:Test|Fuzz|Benchmark)[A-Z]\w*)`)
	repoPath  = regexp.MustCompile(`(?:^|[\s=("'])(?:\./|github\.com/courier-k8s/courier/)?((?:internal|e2e|replicator|reloader|guard|informers|manifests|charts|release|docs)/[\w./-]*[\w/])`)
	heading   = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *#*$`)
	slugStrip = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// Check returns one line per dangling name in the Markdown file path.
func (r *Repo) Check(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	rel, _ := filepath.Rel(r.Root, path)
	var problems []string
	bad := func(line int, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", rel, line, fmt.Sprintf(format, args...)))
	}
	fenced := false
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		code := []string{line}
		if fenced {
			// A shell comment is prose ("# make sure …").
			if i := strings.Index(" "+line, " #"); i >= 0 {
				code = []string{line[:max(i-1, 0)]}
			}
		} else {
			code = nil
			for _, m := range codeSpan.FindAllStringSubmatch(line, -1) {
				code = append(code, m[1])
			}
			for _, m := range append(link.FindAllStringSubmatch(line, -1), refLink.FindAllStringSubmatch(line, -1)...) {
				if msg := r.checkLink(path, m[1]); msg != "" {
					bad(n, "%s", msg)
				}
			}
		}
		for _, c := range code {
			for _, m := range makeCall.FindAllStringSubmatch(c, -1) {
				if !r.Targets[m[2]] {
					bad(n, "make %s: the Makefile has no such target", m[2])
				}
			}
			for _, m := range testName.FindAllStringSubmatch(c, -1) {
				if !r.hasTest(m[1]) {
					bad(n, "%s: no test function of that name (or starting so, as -run matches)", m[1])
				}
			}
			for _, m := range repoPath.FindAllStringSubmatch(c, -1) {
				p := strings.TrimSuffix(m[1], "/")
				if strings.ContainsAny(p, "*<>…") {
					continue // a pattern, not a path
				}
				if _, err := os.Stat(filepath.Join(r.Root, p)); err != nil {
					bad(n, "%s: no such file or directory in the repository", p)
				}
			}
		}
	}
	return problems, sc.Err()
}

func (r *Repo) hasTest(name string) bool {
	if r.Tests[name] {
		return true
	}
	for t := range r.Tests {
		if strings.HasPrefix(t, name) {
			return true
		}
	}
	return false
}

// checkLink says what is wrong with the link target in the file from ("" if
// nothing).
func (r *Repo) checkLink(from, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	dest := from
	if file != "" {
		dest = filepath.Join(filepath.Dir(from), file)
		if strings.HasPrefix(file, "/") { // from the repository's root, as GitHub reads it
			dest = filepath.Join(r.Root, file)
		}
		if _, err := os.Stat(dest); err != nil {
			return fmt.Sprintf("link %s: no such file", target)
		}
	}
	if anchor == "" || !strings.HasSuffix(dest, ".md") {
		return ""
	}
	b, err := os.ReadFile(dest)
	if err != nil {
		return fmt.Sprintf("link %s: %v", target, err)
	}
	for _, a := range Anchors(string(b)) {
		if a == anchor {
			return ""
		}
	}
	return fmt.Sprintf("link %s: %s has no heading with that anchor", target, filepath.Base(dest))
}

// Anchors are the anchors GitHub gives the headings of a Markdown page:
// lower case, punctuation dropped, spaces as hyphens, repeats numbered.
func Anchors(page string) []string {
	seen := map[string]int{}
	var out []string
	fenced := false
	for _, line := range strings.Split(page, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := heading.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		s := strings.ToLower(slugStrip.ReplaceAllString(m[1], ""))
		s = strings.ReplaceAll(s, " ", "-")
		if k := seen[s]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", s, k))
		} else {
			out = append(out, s)
		}
		seen[s]++
	}
	return out
}
