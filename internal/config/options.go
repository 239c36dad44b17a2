package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/notify"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Options is everything courier's flags configure. Every flag has an
// environment twin: COURIER_ and the flag name in upper case with - as _
// (--source-namespaces ↔ COURIER_SOURCE_NAMESPACES). A flag given on the
// command line wins over its environment variable.
type Options struct {
	Kubeconfig        string
	Namespace         string
	SourceNamespaces  globs.List
	ExcludeNamespaces globs.List
	// WatchNamespaces are the only namespaces courier watches, replicates
	// into and reloads in (with --namespace: Watched); none: every one.
	WatchNamespaces []string
	// ResourceLabelSelector selects the Secrets and ConfigMaps courier
	// caches, server-side; empty: all of them.
	ResourceLabelSelector string
	MetricsAddr           string
	ReloadAll             bool
	ReloadCSI             bool
	// ReloadMode is "rollout", or "notify": say what would roll out, roll
	// nothing out.
	ReloadMode string
	// ReloadResources are the custom kinds the reloader also reloads.
	ReloadResources workload.Resources
	// Compat names the other tools whose annotations courier also honours.
	Compat source.Compat
	// NotifyURLs receive a notification of each rollout.
	NotifyURLs notify.Targets
	// ClusterName names the cluster in every notification.
	ClusterName    string
	ReloadDebounce time.Duration
	// ReloadStormChanges and ReloadStormWindow: the circuit breaker per
	// input (0 changes: none).
	ReloadStormChanges int
	ReloadStormWindow  time.Duration
	// ReloadWaveTimeout: how long a rollout wave waits for a workload
	// courier rolled out to be healthy before it halts the change.
	ReloadWaveTimeout time.Duration
	// ReloadMaxInFlight: at most this many courier-started rollouts not
	// yet healthy at once, cluster-wide (0: no limit).
	ReloadMaxInFlight int
	LeaderElect       bool
	LeaseDuration     time.Duration
	RenewDeadline     time.Duration
	RetryPeriod       time.Duration
	KubeAPIQPS        float64
	KubeAPIBurst      int
	ReplicatorWorkers int
	ReloadQPS         float64
	ReloadBurst       int
	LogLevel          string
	Profiling         bool
}

const DefaultNamespace = "courier-system"

// EnvName is the environment twin of a flag.
func EnvName(flagName string) string {
	return "COURIER_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses args (without the program name) and the environment.
func Parse(args []string, getenv func(string) string, out io.Writer) (Options, error) {
	var o Options
	f := newFlags(&o, getenv)
	fs := f.fs
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: courier [flags]\n       courier status [flags]   (what courier is doing; courier status --help)\n       courier plan <secret|configmap>/<name> -n <namespace> [flags]  (what a change of it would roll out, wave by wave; writes nothing)\n       courier migrate [flags]  (from Reloader, kubernetes-replicator, Reflector annotations; courier migrate --help)\n       courier version          (version, VCS revision, Go version)\n\ncourier replicates Secrets and ConfigMaps across namespaces, guards them, and reloads the workloads that consume them.\n\nFlags (each has an environment twin, shown in brackets; a flag on the command line wins):\n")
		fs.VisitAll(func(f *flag.Flag) {
			def := f.DefValue
			if def == "" {
				def = `""`
			}
			fmt.Fprintf(fs.Output(), "  --%s  [%s]\n    \t%s (default %s)\n", f.Name, EnvName(f.Name), f.Usage, def)
		})
	}

	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err := ApplyEnv(fs, getenv); err != nil {
		return o, err
	}
	if f.notifyURLs.err != nil {
		return o, fmt.Errorf("--notify-url [%s]: %w", EnvName("notify-url"), f.notifyURLs.err)
	}
	var err error
	if o.SourceNamespaces, o.ExcludeNamespaces, err = NamespaceGlobs(f.sourceNS, f.excludeNS, o.Namespace); err != nil {
		return o, err
	}
	if o.WatchNamespaces, err = WatchNamespaces(f.watchNS, o.SourceNamespaces, o.Namespace); err != nil {
		return o, err
	}
	if err := CheckResourceLabelSelector(o.ResourceLabelSelector); err != nil {
		return o, err
	}
	return o, o.validate()
}

// Flags is courier's flag set as `courier --help` prints it, with the
// defaults of an empty environment (docs/reference.md is generated from it).
func Flags() *flag.FlagSet {
	return newFlags(&Options{}, func(string) string { return "" }).fs
}

// flags is courier's flag set and the values Parse checks after parsing.
type flags struct {
	fs                  *flag.FlagSet
	sourceNS, excludeNS string
	watchNS             string
	notifyURLs          *secretFlag
}

func newFlags(o *Options, getenv func(string) string) *flags {
	f := &flags{fs: flag.NewFlagSet("courier", flag.ContinueOnError), notifyURLs: &secretFlag{Value: &o.NotifyURLs}}
	fs := f.fs
	ns := getenv("POD_NAMESPACE")
	if ns == "" {
		ns = DefaultNamespace
	}
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: the in-cluster config, else $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.Namespace, "namespace", ns, "courier's own namespace: its Lease lives here, and it is the default source namespace (default: $POD_NAMESPACE, else "+DefaultNamespace+")")
	fs.StringVar(&f.sourceNS, "source-namespaces", "", "comma-separated globs of the namespaces whose Secrets and ConfigMaps may be sources (default: --namespace)")
	fs.StringVar(&f.excludeNS, "exclude-namespaces", "", "comma-separated globs of namespaces never replicated into")
	fs.StringVar(&f.watchNS, "watch-namespaces", "", "comma-separated names of the only namespaces courier lists and watches Secrets, ConfigMaps, workloads and custom kinds in, replicates into and reloads in, so it needs Roles in these namespaces only (--namespace is always watched; --source-namespaces must name watched namespaces); default: every namespace, which needs cluster-wide RBAC (docs/scoped.md)")
	fs.StringVar(&o.ResourceLabelSelector, "resource-label-selector", "", "label selector (as kubectl -l) of the Secrets and ConfigMaps courier caches, in every namespace, applied by the API server: sources, replicas, backups and consumed inputs outside it are not seen (replicas and backups carry their source's values of the selector's keys, so they are seen when it is); default: all of them (docs/scoped.md)")
	fs.StringVar(&o.MetricsAddr, "metrics-addr", ":8080", "address for /metrics, /healthz and /readyz")
	fs.Var(&o.Compat, "compat", "comma-separated tools whose annotations courier also honours, with their meaning there as far as courier's rules allow: reloader (Stakater Reloader), replicator (mittwald kubernetes-replicator), reflector (EmberStack Reflector); see docs/migrating.md")
	fs.Var(f.notifyURLs, "notify-url", "after each rollout, POST a JSON notification here (repeatable, or comma-separated); prefix slack+, teams+ or gchat+ for a Slack, Microsoft Teams or Google Chat incoming-webhook message")
	fs.StringVar(&o.ClusterName, "cluster-name", "", "the cluster's name, given in every rollout notification (--notify-url), so one channel can serve many clusters, and on the replicas courier writes into other clusters (courier.dev/source-cluster; empty: hub)")
	fs.Var(&o.ReloadResources, "reload-resources", "custom kinds to reload too, by CRD name (comma-separated, repeatable): rollouts.argoproj.io (Argo Rollouts: read and reloaded like a Deployment), or <plural>.<group> for a custom resource that names its inputs in courier.dev/reload-on, with :<field.path> of the annotations map that gets courier.dev/config-hash (default metadata.annotations); each needs RBAC: docs/reload.md")
	fs.StringVar(&o.ReloadMode, "reload-mode", "rollout", "rollout: roll out the workloads whose consumed content changed; notify: roll nothing out, and say in an Event (ReloadNotified) and a notification (--notify-url) what would have rolled out, as courier.dev/reload: notify does for one workload")
	fs.BoolVar(&o.ReloadAll, "reload-all", false, "reload every workload that consumes a changed Secret or ConfigMap, without opt-in annotations")
	fs.BoolVar(&o.ReloadCSI, "reload-csi", false, "reload workloads that mount a Secrets Store CSI driver volume when the driver reports new versions of its SecretProviderClass's objects (its SecretProviderClassPodStatus objects: needs list and watch on them; docs/reload.md)")
	fs.DurationVar(&o.ReloadDebounce, "reload-debounce", 2*time.Second, "changes to one workload's inputs within this window give one rollout")
	fs.IntVar(&o.ReloadStormChanges, "reload-storm-changes", 5, "circuit breaker per input: a Secret or ConfigMap whose content changes more than this many times within --reload-storm-window (a change within one --reload-debounce of the last counted one counts with it) causes no rollout until it has not changed for a window (then its consumers roll out once, if what they consume differs); 0 turns it off")
	fs.DurationVar(&o.ReloadStormWindow, "reload-storm-window", 10*time.Minute, "the window of --reload-storm-changes, and how long a flapping input must stay quiet before it causes rollouts again")
	fs.DurationVar(&o.ReloadWaveTimeout, "reload-wave-timeout", 10*time.Minute, "rollout waves (courier.dev/reload-wave): a workload of an earlier wave not healthy this long after courier rolled it out halts the change for the later waves, until it is healthy or the input changes again")
	fs.IntVar(&o.ReloadMaxInFlight, "reload-max-in-flight", 0, "at most this many rollouts courier started and not yet healthy (Deployments, StatefulSets, DaemonSets, Argo Rollouts) at any moment, cluster-wide; the rest wait and go in order (wave, then namespace/name) as those become healthy; 0: no limit")
	fs.Float64Var(&o.ReloadQPS, "reload-qps", 50, "rollouts per second across the cluster, so a mass change cannot restart everything at once")
	fs.IntVar(&o.ReloadBurst, "reload-burst", 100, "rollouts allowed at once above --reload-qps")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect a leader on a Lease in --namespace; only the leader writes")
	fs.DurationVar(&o.LeaseDuration, "lease-duration", 15*time.Second, "the longest a standby waits to take over from a leader that died (the Lease courier writes is shorter by 4.4 retry periods, client-go's polling and jitter)")
	fs.DurationVar(&o.RenewDeadline, "renew-deadline", 8*time.Second, "how long the leader keeps trying to renew before it gives up leadership")
	fs.DurationVar(&o.RetryPeriod, "retry-period", time.Second, "how often the leader renews the Lease and standbys check it")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", 2000, "sustained requests per second to the Kubernetes API (client-side limit against a runaway loop; API Priority and Fairness paces courier on a loaded API server; one source change to N namespaces is N writes; why 2000: docs/scale.md)")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", 4000, "burst of requests to the Kubernetes API above --kube-api-qps")
	fs.IntVar(&o.ReplicatorWorkers, "replicator-workers", 64, "replicas written concurrently (across namespaces)")
	fs.StringVar(&o.LogLevel, "log-level", "info", "log level: debug, info, warn or error (logs are JSON on stderr)")
	fs.BoolVar(&o.Profiling, "profiling", false, "serve the Go profiler at /debug/pprof/ on --metrics-addr")
	return f
}

// secretFlag is a flag whose value may hold a secret (a webhook URL's
// token): the flag package repeats a value it cannot set in its error, so
// Set keeps the error, which names the bad part only, for Parse to return.
type secretFlag struct {
	flag.Value
	err error
}

func (f *secretFlag) Set(v string) error {
	if err := f.Value.Set(v); err != nil && f.err == nil {
		f.err = err
	}
	return nil
}

// ApplyEnv sets every flag not given on the command line from its
// environment twin, if that is set.
func ApplyEnv(fs *flag.FlagSet, getenv func(string) string) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var errs error
	fs.VisitAll(func(f *flag.Flag) {
		v := getenv(EnvName(f.Name))
		if set[f.Name] || v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			// The error names the bad part; the value itself may be a
			// secret (a webhook URL from a Secret), so it is not repeated.
			errs = errors.Join(errs, fmt.Errorf("%s: %w", EnvName(f.Name), err))
		}
	})
	return errs
}

// NamespaceGlobs parses --source-namespaces (default: namespace) and
// --exclude-namespaces.
func NamespaceGlobs(source, exclude, namespace string) (globs.List, globs.List, error) {
	if source == "" {
		source = namespace
	}
	src, err := globs.Parse(source)
	if err != nil {
		return nil, nil, fmt.Errorf("--source-namespaces: %w", err)
	}
	excl, err := globs.Parse(exclude)
	if err != nil {
		return nil, nil, fmt.Errorf("--exclude-namespaces: %w", err)
	}
	return src, excl, nil
}

// WatchNamespaces parses --watch-namespaces: namespace names, each once,
// sorted, with namespace (courier's own, where its Lease, settings and
// digest key live) added; none when list is empty (every namespace). Every
// --source-namespaces entry must match a watched namespace: one that
// matches none would name sources courier can never see.
func WatchNamespaces(list string, sources globs.List, namespace string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, nil
	}
	seen := map[string]bool{namespace: true}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			return nil, fmt.Errorf("--watch-namespaces: %q is not a namespace name: %s", n, strings.Join(errs, "; "))
		}
		seen[n] = true
	}
	watched := slices.Sorted(maps.Keys(seen))
	for _, g := range sources {
		if !slices.ContainsFunc(watched, globs.List{g}.Match) {
			return nil, fmt.Errorf("--source-namespaces %q matches no namespace of --watch-namespaces (%s, with --namespace): courier could never see its sources; add the namespace to --watch-namespaces", g, strings.Join(watched, ","))
		}
	}
	return watched, nil
}

// CheckResourceLabelSelector refuses a --resource-label-selector the API
// server would refuse, or one naming a key courier sets itself on its
// replicas and backups (they would fall outside it, or look like sources).
func CheckResourceLabelSelector(sel string) error {
	keys, err := ResourceLabelKeys(sel)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k == wellknown.ManagedBy || strings.HasPrefix(k, wellknown.Prefix) {
			return fmt.Errorf("--resource-label-selector %q names %s, a label courier sets on its replicas and backups itself; select on your own labels (e.g. courier-scope=yes)", sel, k)
		}
	}
	_, err = SatisfyingLabels(sel)
	return err
}

// SatisfyingLabels is a label set that --resource-label-selector sel
// selects, for what courier creates from nothing (its digest key): for each
// requirement the first value it allows; an error when none exists (as for
// a=1,a=2).
func SatisfyingLabels(sel string) (map[string]string, error) {
	parsed, err := labels.Parse(sel)
	if err != nil {
		return nil, fmt.Errorf("--resource-label-selector %q: %w", sel, err)
	}
	out := map[string]string{}
	reqs, _ := parsed.Requirements()
	for _, r := range reqs {
		values := r.Values().List()
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			out[r.Key()] = values[0]
		case selection.Exists:
			out[r.Key()] = ""
		case selection.GreaterThan, selection.LessThan:
			n, _ := strconv.ParseInt(values[0], 10, 64) // Parse checked it is an integer
			if r.Operator() == selection.GreaterThan {
				n++
			} else {
				n--
			}
			out[r.Key()] = strconv.FormatInt(n, 10)
		}
	}
	if !parsed.Matches(labels.Set(out)) {
		return nil, fmt.Errorf("--resource-label-selector %q selects no object at all", sel)
	}
	return out, nil
}

// ResourceLabelKeys are the label keys --resource-label-selector sel
// names: replicas and backups carry their source's values of them.
func ResourceLabelKeys(sel string) ([]string, error) {
	parsed, err := labels.Parse(sel)
	if err != nil {
		return nil, fmt.Errorf("--resource-label-selector %q: %w", sel, err)
	}
	reqs, _ := parsed.Requirements()
	var keys []string
	for _, r := range reqs {
		keys = append(keys, r.Key())
	}
	return keys, nil
}

// ElectionLease is the Lease duration courier gives client-go's leader
// election: --lease-duration less the worst delay of client-go's polling. A
// standby sees the leader's last renewal up to (1+JitterFactor) retry periods
// late and sees the Lease expire up to as late again, so taking over from a
// leader that died never takes longer than --lease-duration.
func (o Options) ElectionLease() time.Duration {
	return o.LeaseDuration - time.Duration(2*(1+leaderelection.JitterFactor)*float64(o.RetryPeriod))
}

func (o Options) validate() error {
	var errs []error
	if o.Namespace == "" {
		errs = append(errs, errors.New("--namespace must not be empty"))
	}
	if o.ReloadDebounce < 0 {
		errs = append(errs, errors.New("--reload-debounce must not be negative"))
	}
	if o.ReloadStormChanges < 0 || (o.ReloadStormChanges > 0 && o.ReloadStormWindow <= 0) {
		errs = append(errs, errors.New("--reload-storm-changes must not be negative, and with it --reload-storm-window must be positive"))
	}
	if o.ReloadMaxInFlight < 0 {
		errs = append(errs, errors.New("--reload-max-in-flight must not be negative (0: no limit)"))
	}
	if o.ReloadWaveTimeout <= 0 {
		errs = append(errs, errors.New("--reload-wave-timeout must be positive"))
	}
	if o.ReloadQPS <= 0 || o.ReloadBurst < 1 {
		errs = append(errs, errors.New("--reload-qps and --reload-burst must be positive"))
	}
	if o.ReplicatorWorkers < 1 {
		errs = append(errs, errors.New("--replicator-workers must be at least 1"))
	}
	if o.KubeAPIQPS <= 0 || o.KubeAPIBurst <= 0 {
		errs = append(errs, errors.New("--kube-api-qps and --kube-api-burst must be positive"))
	}
	if o.LeaderElect && !(o.ElectionLease().Truncate(time.Second) > o.RenewDeadline &&
		o.RenewDeadline > time.Duration(leaderelection.JitterFactor*float64(o.RetryPeriod)) && o.RetryPeriod > 0) {
		errs = append(errs, fmt.Errorf("leader election needs --lease-duration − 4.4 × --retry-period (%s, rounded down to whole seconds) > --renew-deadline > 1.2 × --retry-period > 0",
			o.ElectionLease()))
	}
	if o.ReloadMode != "rollout" && o.ReloadMode != "notify" {
		errs = append(errs, fmt.Errorf("--reload-mode %q: want rollout or notify", o.ReloadMode))
	}
	switch o.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		errs = append(errs, fmt.Errorf("--log-level %q: want debug, info, warn or error", o.LogLevel))
	}
	return errors.Join(errs...)
}

// RestConfig is the client config for the Kubernetes API.
func RestConfig(o Options) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if o.Kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	} else if cfg, err = rest.InClusterConfig(); errors.Is(err, rest.ErrNotInCluster) {
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes client config: %w", err)
	}
	cfg.QPS = float32(o.KubeAPIQPS)
	cfg.Burst = o.KubeAPIBurst
	cfg.UserAgent = "courier"
	// Protobuf, as kube-controller-manager speaks: cheaper than JSON for the
	// API server to encode (every watch event) and for courier to decode, and
	// Secret values travel as bytes rather than base64.
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return cfg, nil
}
