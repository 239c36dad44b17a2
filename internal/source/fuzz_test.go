package source

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// FuzzParseSelector feeds arbitrary courier.dev/replicate-to values to
// ParseSelector, which must never panic; a selector it accepts must print to
// a form that parses back to a selector that prints the same and matches the
// same namespaces (checked on label sets built from the selector's own keys
// and values), so what courier logs and reports is what it applies.
// Run `go test -fuzz=FuzzParseSelector ./replicator`.
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
		for _, set := range probeSets(sel) {
			if sel.Matches(set) != again.Matches(set) {
				t.Fatalf("ParseSelector(%q) and its reprint %q disagree on %v", s, sel.String(), set)
			}
		}
		if sel.Empty() && !sel.Matches(labels.Set{"any": "thing"}) {
			t.Fatalf("empty selector from %q matches nothing", s)
		}
	})
}

// probeSets are label sets that tell selectors over sel's keys apart: none;
// each key with each of its values or another value; and every key at once,
// with its first value (which a conjunction of equalities matches) or with
// another value.
func probeSets(sel labels.Selector) []labels.Set {
	sets := []labels.Set{{}}
	first, other := labels.Set{}, labels.Set{}
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		values := r.Values().List() // sorted
		for _, v := range append(values, "other-value") {
			sets = append(sets, labels.Set{r.Key(): v})
		}
		if _, set := first[r.Key()]; !set && len(values) > 0 {
			first[r.Key()] = values[0]
		}
		other[r.Key()] = "other-value"
	}
	return append(sets, first, other)
}
