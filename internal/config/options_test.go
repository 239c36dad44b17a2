package config

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/courier-k8s/courier/internal/globs"
)

func TestParseOptions(t *testing.T) {
	defaults := Options{
		Namespace:          "courier-system",
		SourceNamespaces:   globs.List{"courier-system"},
		MetricsAddr:        ":8080",
		ReloadMode:         "rollout",
		ReloadStormChanges: 5,
		ReloadStormWindow:  10 * time.Minute,
		ReloadWaveTimeout:  10 * time.Minute,
		ReloadDebounce:     2 * time.Second,
		LeaderElect:        true,
		LeaseDuration:      15 * time.Second,
		RenewDeadline:      8 * time.Second,
		RetryPeriod:        time.Second,
		KubeAPIQPS:         2000,
		KubeAPIBurst:       4000,
		ReplicatorWorkers:  64,
		ReloadQPS:          50,
		ReloadBurst:        100,
		LogLevel:           "info",
	}
	with := func(f func(*Options)) Options { o := defaults; f(&o); return o }

	tests := []struct {
		name string
		args []string
		env  map[string]string
		want Options
	}{
		{"defaults", nil, nil, defaults},
		{"POD_NAMESPACE sets namespace and default sources", nil, map[string]string{"POD_NAMESPACE": "ops"},
			with(func(o *Options) { o.Namespace = "ops"; o.SourceNamespaces = globs.List{"ops"} })},
		{"env twin", nil, map[string]string{"COURIER_SOURCE_NAMESPACES": "platform, team-*", "COURIER_RELOAD_ALL": "true"},
			with(func(o *Options) { o.SourceNamespaces = globs.List{"platform", "team-*"}; o.ReloadAll = true })},
		{"flag wins over env", []string{"--reload-debounce=5s"}, map[string]string{"COURIER_RELOAD_DEBOUNCE": "1s"},
			with(func(o *Options) { o.ReloadDebounce = 5 * time.Second })},
		{"flags", []string{"--namespace=x", "--exclude-namespaces=sandbox-*", "--leader-elect=false", "--metrics-addr=127.0.0.1:9"}, nil,
			with(func(o *Options) {
				o.Namespace = "x"
				o.SourceNamespaces = globs.List{"x"}
				o.ExcludeNamespaces = globs.List{"sandbox-*"}
				o.LeaderElect = false
				o.MetricsAddr = "127.0.0.1:9"
			})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseOptionsRejects(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"bad glob", []string{"--source-namespaces=[x"}, nil},
		{"bad env value", nil, map[string]string{"COURIER_RELOAD_ALL": "maybe"}},
		{"bad log level", []string{"--log-level=loud"}, nil},
		{"bad reload mode", []string{"--reload-mode=dry-run"}, nil},
		{"lease shorter than renew", []string{"--lease-duration=5s"}, nil},
		{"lease too short for the retry period", []string{"--lease-duration=12s"}, nil}, // 12 − 4.4 = 7.6 < 8
		{"stray argument", []string{"extra"}, nil},
		{"negative debounce", []string{"--reload-debounce=-1s"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse(tt.args, func(k string) string { return tt.env[k] }, io.Discard); err == nil {
				t.Error("accepted")
			}
		})
	}
}

// An invalid --notify-url, on the command line or in its environment twin,
// is named by scheme and host only: its path may hold a webhook's token.
func TestAnInvalidNotifyURLIsNotRepeated(t *testing.T) {
	const token = "T000/B000/XXXXSECRET"
	for _, tt := range []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"flag, wrong scheme", []string{"--notify-url=ftp://hooks.example.com/services/" + token}, nil, "ftp://hooks.example.com"},
		{"flag, unparsable", []string{"--notify-url=https://hooks.example.com/services/" + token + "%zz"}, nil, "unparsable URL"},
		{"environment", nil, map[string]string{"COURIER_NOTIFY_URL": "slack+ftp://hooks.example.com/services/" + token}, "slack ftp://hooks.example.com"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			_, err := Parse(tt.args, func(k string) string { return tt.env[k] }, &out)
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), token) || strings.Contains(out.String(), token) {
				t.Errorf("the token is repeated: error %q, output %q", err, out.String())
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--notify-url [COURIER_NOTIFY_URL]") {
				t.Errorf("error %q does not name the flag and %q", err, tt.want)
			}
		})
	}
}

func TestWatchNamespacesAndResourceLabelSelector(t *testing.T) {
	for _, tc := range []struct {
		name, watch, sources, selector string
		want                           []string
		err                            string // a part of the error; "" for none
	}{
		{name: "every namespace", watch: "", sources: "anything-*", want: nil},
		{name: "own namespace added, sorted, once", watch: " b,a,b ", want: []string{"a", "b", "courier"}},
		{name: "sources among them", watch: "a,b", sources: "a,team-*", err: `--source-namespaces "team-*" matches no namespace`},
		{name: "a glob matching a watched one", watch: "team-a,b", sources: "team-*", want: []string{"b", "courier", "team-a"}},
		{name: "not a name", watch: "a,Team_B", err: `"Team_B" is not a namespace name`},
		{name: "empty entry", watch: "a,,b", err: `"" is not a namespace name`},
		{name: "selector", selector: "courier-scope=yes,env in (prod)"},
		{name: "bad selector", selector: "a==b==c", err: "--resource-label-selector"},
		{name: "selector on courier's label", selector: "app.kubernetes.io/managed-by!=Helm", err: "a label courier sets"},
		{name: "selector on a courier.dev key", selector: "courier.dev/replica", err: "a label courier sets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--namespace=courier", "--watch-namespaces=" + tc.watch, "--resource-label-selector=" + tc.selector}
			if tc.sources != "" {
				args = append(args, "--source-namespaces="+tc.sources)
			}
			o, err := Parse(args, func(string) string { return "" }, io.Discard)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, o.WatchNamespaces); diff != "" {
				t.Errorf("watched (-want +got):\n%s", diff)
			}
		})
	}
	keys, err := ResourceLabelKeys("team=a,env in (prod),!legacy")
	if err != nil || !cmp.Equal(keys, []string{"env", "legacy", "team"}) {
		t.Errorf("ResourceLabelKeys = %v, %v; want [env legacy team]", keys, err)
	}
}

func TestSatisfyingLabels(t *testing.T) {
	for sel, want := range map[string]map[string]string{
		"":                             {},
		"courier-scope=yes":            {"courier-scope": "yes"},
		"env in (prod,dev),!legacy":    {"env": "dev"},
		"team,tier!=db,zone notin (a)": {"team": ""},
		"gen>3,rank<2":                 {"gen": "4", "rank": "1"},
	} {
		got, err := SatisfyingLabels(sel)
		if err != nil || !cmp.Equal(want, got) {
			t.Errorf("SatisfyingLabels(%q) = %v, %v; want %v", sel, got, err, want)
		}
	}
	if got, err := SatisfyingLabels("a=1,a=2"); err == nil {
		t.Errorf("a=1,a=2: got %v, want an error (nothing satisfies it)", got)
	}
}
