package status

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/source"
)

// Main is `courier status`: it reads the cluster with the user's
// kubeconfig and prints every source's replication and its consumers'
// reloads. It returns the exit code: 0, 1 when the cluster could not be
// read, 2 on bad flags.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("courier status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var kubeconfig, namespace, sourceNS, excludeNS, output string
	fs.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig; default: the in-cluster config, else $KUBECONFIG or ~/.kube/config")
	fs.StringVar(&namespace, "namespace", config.DefaultNamespace, "courier's namespace, the default source namespace")
	fs.StringVar(&sourceNS, "source-namespaces", "", "as courier's flag: the namespaces whose sources count (default: --namespace)")
	fs.StringVar(&excludeNS, "exclude-namespaces", "", "as courier's flag: namespaces never replicated into")
	var compat source.Compat
	fs.Var(&compat, "compat", "as courier's flag: the other tools whose annotations make sources ("+strings.Join(source.Tools, ", ")+")")
	fs.StringVar(&output, "o", "table", "output format: table or json")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: courier status [flags]\n\nPrints, per source, its selector, the namespaces it targets and how many hold a replica in sync,\nare blocked by a conflict or are in error, then the last reload of each workload consuming it.\nGive it the flags (or COURIER_* variables) courier runs with.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := config.ApplyEnv(fs, getenv); err != nil {
		fmt.Fprintf(stderr, "courier status: %v\n", err)
		return 2
	}
	src, excl, err := config.NamespaceGlobs(sourceNS, excludeNS, namespace)
	if err == nil && output != "table" && output != "json" {
		err = fmt.Errorf("-o %q: want table or json", output)
	}
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	if err != nil {
		fmt.Fprintf(stderr, "courier status: %v\n", err)
		return 2
	}

	o := Options{Installation: namespace, SourceNamespaces: src, ExcludeNamespaces: excl, Compat: compat}
	if err := printStatus(context.Background(), kubeconfig, o, output, stdout); err != nil {
		fmt.Fprintf(stderr, "courier status: %v\n", err)
		return 1
	}
	return 0
}

func printStatus(ctx context.Context, kubeconfig string, o Options, output string, w io.Writer) error {
	cfg, err := config.RestConfig(config.Options{Kubeconfig: kubeconfig, KubeAPIQPS: 50, KubeAPIBurst: 100})
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c, err := Collect(ctx, client, meta, o.Compat)
	if err != nil {
		return err
	}
	r := Build(c, o)
	if output == "json" {
		return r.WriteJSON(w)
	}
	return r.WriteTable(w)
}
