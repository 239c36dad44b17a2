package config

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Subcommand is the command line the subcommands that read the cluster
// with the user's kubeconfig share (`courier status`, `courier migrate`):
// --kubeconfig, --namespace, --source-namespaces and -o table|json, each
// flag with its environment twin. A subcommand adds its own flags to Flags
// before Parse.
type Subcommand struct {
	Flags                                   *flag.FlagSet
	Kubeconfig, Namespace, SourceNS, Output string
	// WatchNS and ResourceLabels are --watch-namespaces and
	// --resource-label-selector: read only what courier would.
	WatchNS, ResourceLabels string
	name                    string
	stderr                  io.Writer
}

// NewSubcommand returns the command line of `courier <name>`; usage is the
// text printed above the flags by --help.
func NewSubcommand(name, usage string, stderr io.Writer) *Subcommand {
	s := &Subcommand{Flags: flag.NewFlagSet("courier "+name, flag.ContinueOnError), name: name, stderr: stderr}
	fs := s.Flags
	fs.SetOutput(stderr)
	fs.StringVar(&s.Kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: the in-cluster config, else $KUBECONFIG or ~/.kube/config")
	fs.StringVar(&s.Namespace, "namespace", DefaultNamespace, "courier's namespace, the default source namespace")
	fs.StringVar(&s.SourceNS, "source-namespaces", "", "as courier's flag: the namespaces whose sources count (default: --namespace)")
	fs.StringVar(&s.WatchNS, "watch-namespaces", "", "as courier's flag: read Secrets, ConfigMaps and workloads only in these namespaces (and --namespace), with the Roles a namespace-scoped courier has")
	fs.StringVar(&s.ResourceLabels, "resource-label-selector", "", "as courier's flag: only the Secrets and ConfigMaps it selects (outside courier's namespace) are read; the rest are not seen")
	fs.StringVar(&s.Output, "o", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: courier %s [flags]\n\n%s\n\nFlags:\n", name, usage)
		fs.PrintDefaults()
	}
	return s
}

// Parse reads args and then the environment twins, and checks them; check,
// if set, checks the subcommand's own flags. When it returns false the
// subcommand ends with exit code code: 0 after --help, 2 on bad flags (the
// error is printed).
func (s *Subcommand) Parse(args []string, getenv func(string) string, check func() error) (code int, ok bool) {
	if err := s.Flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0, false
		}
		return 2, false
	}
	err := ApplyEnv(s.Flags, getenv)
	if err == nil && check != nil {
		err = check()
	}
	if err == nil {
		err = CheckResourceLabelSelector(s.ResourceLabels)
	}
	if err == nil && s.Output != "table" && s.Output != "json" {
		err = fmt.Errorf("-o %q: want table or json", s.Output)
	}
	if err == nil && s.Flags.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %q", s.Flags.Args())
	}
	if err != nil {
		s.Fail(err)
		return 2, false
	}
	return 0, true
}

// Fail prints err as the subcommand's.
func (s *Subcommand) Fail(err error) { fmt.Fprintf(s.stderr, "courier %s: %v\n", s.name, err) }

// Clients are the typed and the metadata-only client, with the user's
// kubeconfig and a modest client-side rate limit (the API server is shared).
func (s *Subcommand) Clients() (kubernetes.Interface, metadata.Interface, error) {
	cfg, err := s.restConfig()
	if err != nil {
		return nil, nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return client, meta, nil
}

// Dynamic is a dynamic client with the same configuration, for custom kinds.
func (s *Subcommand) Dynamic() (dynamic.Interface, error) {
	cfg, err := s.restConfig()
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(cfg)
}

func (s *Subcommand) restConfig() (*rest.Config, error) {
	return RestConfig(Options{Kubeconfig: s.Kubeconfig, KubeAPIQPS: 50, KubeAPIBurst: 100})
}
