package trace

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func s(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }

func TestFormatThenParseGivesTheOpsBack(t *testing.T) {
	ops := []Op{
		{At: 0, What: "create namespace", NS: "n0", Arg: "a", Name: "soak-x1"},
		{At: s(1.25), What: "edit source alpha", NS: "src"},
		{At: s(2.5), What: "cut courier's watches"},
		{At: s(3), What: "hold the second installation's kube-apiserver", Arg: "2s"},
	}
	got, err := Parse(strings.NewReader("# a comment line\n\n" + Format(ops)))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ops, got); diff != "" {
		t.Errorf("parsed back (-want +got):\n%s", diff)
	}
}

func TestParseSaysWhatIsWrong(t *testing.T) {
	for _, c := range []struct{ line, want string }{
		{"1.0s\tcreate namespace\tn1", "want 4 tab-separated fields"},
		{"soon\tcreate namespace\tn1\ta", "is not a number of seconds"},
		{"-1s\tcreate namespace\tn1\ta", "is not a number of seconds"},
		{"1s\tcreate namespace\tkube-system\ta", "namespace \"kube-system\" is none of"},
		{"1s\tcreate namespace\tnx\ta", "namespace \"nx\" is none of"},
	} {
		_, err := Parse(strings.NewReader(c.line + "\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", c.line, err, c.want)
		}
	}
}

func TestShorten(t *testing.T) {
	ops := []Op{
		{At: 0, What: "create namespace", NS: "n0", Arg: "a"},
		{At: 0, What: "create namespace", NS: "n1", Arg: "b"},
		{At: s(10), What: "create namespace", NS: "n2", Arg: "a"},
		{At: s(20), What: "edit source alpha", NS: "src"},
		{At: s(30), What: "relabel namespace", NS: "n1", Arg: "c"},
		{At: s(40), What: "create consumer", NS: "n2"},
		{At: s(100), What: "kill courier"},
		{At: s(150), What: "edit source delta", NS: "src2"},
		{At: s(160), What: "edit replica", NS: "n2"},
		{At: s(170), What: "create consumer", NS: "n1"},
		{At: s(200), What: "restart etcd"},
	}
	at := func(xs ...float64) []Op {
		var out []Op
		for _, x := range xs {
			for _, o := range ops {
				if o.At == s(x) {
					out = append(out, o)
				}
			}
		}
		return out
	}
	for _, c := range []struct {
		name          string
		named         []string
		until, window float64
		want          []Op
	}{
		{"a namespace named, the time known: its operations, the setup, and the faults and source edits of the window before",
			[]string{"n2"}, 165, 60, at(0, 10, 40, 150, 160)},
		{"the time unknown: every fault and source edit", []string{"n2"}, 0, 60, at(0, 10, 20, 40, 100, 150, 160, 200)},
		{"a source named: its edits, however early", []string{"src"}, 165, 60, at(0, 20, 150)},
		{"nothing named: all up to the time", nil, 165, 60, at(0, 10, 20, 30, 40, 100, 150, 160)},
		{"nothing named, nothing known: all", nil, 0, 60, ops},
	} {
		t.Run(c.name, func(t *testing.T) {
			named := map[string]bool{}
			for _, n := range c.named {
				named[n] = true
			}
			if diff := cmp.Diff(c.want, Shorten(ops, named, s(c.until), s(c.window))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
