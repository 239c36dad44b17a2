package globs

import "testing"

func TestMatch(t *testing.T) {
	tests := []struct {
		list string
		name string
		want bool
	}{
		{"platform", "platform", true},
		{"platform", "platform-2", false},
		{"platform, team-*", "team-a", true},
		{"team-*", "team", false},
		{"*", "anything", true},
		{"", "anything", false},
		{" , ", "x", false},
		{"a?c", "abc", true},
		{"[ab]-x", "b-x", true},
	}
	for _, tt := range tests {
		t.Run(tt.list+"/"+tt.name, func(t *testing.T) {
			l, err := Parse(tt.list)
			if err != nil {
				t.Fatal(err)
			}
			if got := l.Match(tt.name); got != tt.want {
				t.Errorf("Parse(%q).Match(%q) = %v, want %v", tt.list, tt.name, got, tt.want)
			}
		})
	}
}

func TestParseRejectsBadPattern(t *testing.T) {
	if _, err := Parse("ok,[unclosed"); err == nil {
		t.Fatal("Parse accepted an unclosed bracket")
	}
}
