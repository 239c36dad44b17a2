package replicator

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// FuzzParseSelector feeds arbitrary courier.dev/replicate-to values to
// ParseSelector, which must never panic; a selector it accepts must print
// to a form that parses back to the same selector, so what courier logs and
// reports is what it applies. Run `go test -fuzz=FuzzParseSelector ./replicator`.
func FuzzParseSelector(f *testing.F) {
	for _, seed := range []string{
		"", "*", " * ", "env=prod", "env in (prod,staging),team!=legacy", "kubernetes.io/metadata.name in (a,b)",
		"!legacy", "tier", "env notin (dev)", "((", "env in (", "a=b,", "x==y", "k=v,k!=w", "env=prod,*",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sel, err := ParseSelector(s)
		if err != nil {
			return
		}
		again, err := ParseSelector(sel.String())
		if err != nil {
			t.Fatalf("ParseSelector(%q) printed %q, which does not parse: %v", s, sel.String(), err)
		}
		if again.String() != sel.String() {
			t.Fatalf("ParseSelector(%q) = %q, reparsed %q", s, sel.String(), again.String())
		}
		if sel.Empty() && !sel.Matches(labels.Set{"any": "thing"}) {
			t.Fatalf("empty selector from %q matches nothing", s)
		}
	})
}
