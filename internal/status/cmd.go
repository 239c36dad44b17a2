package status

import (
	"context"
	"io"
	"strings"

	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/workload"
)

// Main is `courier status`: it reads the cluster with the user's
// kubeconfig and prints every source's replication and its consumers'
// reloads. It returns the exit code: 0, 1 when the cluster could not be
// read, 2 on bad flags.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := config.NewSubcommand("status", "Prints, per source, its selector, the namespaces it targets and how many hold a replica in sync,\nare blocked by a conflict or are in error, then the last reload of each workload consuming it.\nGive it the flags (or COURIER_* variables) courier runs with.", stderr)
	var excludeNS, sa string
	var compat source.Compat
	var resources workload.Resources
	cmd.Flags.Var(&resources, "reload-resources", "as courier's flag: the custom kinds it reloads (status says whether courier may watch each)")
	cmd.Flags.StringVar(&sa, "service-account", "courier", "courier's ServiceAccount, in --namespace (for --reload-resources)")
	cmd.Flags.StringVar(&excludeNS, "exclude-namespaces", "", "as courier's flag: namespaces never replicated into")
	cmd.Flags.Var(&compat, "compat", "as courier's flag: the other tools whose annotations make sources ("+strings.Join(source.Tools, ", ")+")")
	var src, excl globs.List
	code, ok := cmd.Parse(args, getenv, func() (err error) {
		src, excl, err = config.NamespaceGlobs(cmd.SourceNS, excludeNS, cmd.Namespace)
		return err
	})
	if !ok {
		return code
	}
	o := Options{Installation: cmd.Namespace, SourceNamespaces: src, ExcludeNamespaces: excl, Compat: compat}
	if err := printStatus(context.Background(), cmd, o, resources, sa, stdout); err != nil {
		cmd.Fail(err)
		return 1
	}
	return 0
}

func printStatus(ctx context.Context, cmd *config.Subcommand, o Options, resources workload.Resources, sa string, w io.Writer) error {
	client, meta, err := cmd.Clients()
	if err != nil {
		return err
	}
	c, err := Collect(ctx, client, meta, o.Compat)
	if err != nil {
		return err
	}
	r := Build(c, o)
	r.CustomKinds = CheckKinds(ctx, client, o.Installation, sa, resources)
	if cmd.Output == "json" {
		return r.WriteJSON(w)
	}
	return r.WriteTable(w)
}
