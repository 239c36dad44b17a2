package status

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/settings"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/workload"
)

// Main is `courier status`: it reads the cluster with the user's
// kubeconfig and prints every source's replication and its consumers'
// reloads, as the running courier does them: it reads the settings that
// courier's leader published (package settings), and a flag given wins. It
// returns the exit code: 0, 1 when the cluster could not be read, 2 on bad
// flags or when several installations leave it to --namespace to choose.
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	cmd := config.NewSubcommand("status", "Prints, per source, its selector, the namespaces it targets and how many hold a replica in sync,\nare blocked by a conflict or are in error, then the last reload of each workload consuming it.\nIt reports what the running courier does: it reads the settings its leader publishes (ConfigMap\n"+settings.Name+" in courier's namespace); a flag given here (or its COURIER_* variable) wins. With several\ninstallations, --namespace picks one.", stderr)
	var excludeNS, sa, compat, resources string
	cmd.Flags.StringVar(&resources, "reload-resources", "", "as courier's flag: the custom kinds it reloads (status says whether courier may watch each)")
	cmd.Flags.StringVar(&sa, "service-account", "courier", "courier's ServiceAccount, in --namespace (for --reload-resources)")
	cmd.Flags.StringVar(&excludeNS, "exclude-namespaces", "", "as courier's flag: namespaces never replicated into")
	cmd.Flags.StringVar(&compat, "compat", "", "as courier's flag: the other tools whose annotations make sources ("+strings.Join(source.Tools, ", ")+")")
	code, ok := cmd.Parse(args, getenv, func() error {
		_, err := options(cmd.Namespace, cmd.SourceNS, excludeNS, compat, resources)
		return err
	})
	if !ok {
		return code
	}
	given := map[string]bool{}
	cmd.Flags.Visit(func(f *flag.Flag) { given[f.Name] = true })

	ctx := context.Background()
	client, _, err := cmd.Clients()
	if err != nil {
		cmd.Fail(err)
		return 1
	}
	scope := ""
	if given["namespace"] {
		scope = cmd.Namespace
	}
	found, err := settings.List(ctx, client, scope)
	if err != nil {
		cmd.Fail(err)
		return 1
	}
	var inst *Installation
	switch {
	case len(found) > 1:
		var names []string
		for _, i := range found {
			names = append(names, fmt.Sprintf("%s (%s; --source-namespaces=%s)", i.Namespace, i.Version, i.SourceNamespaces))
		}
		cmd.Fail(fmt.Errorf("%d courier installations run here: %s; choose one with --namespace", len(found), strings.Join(names, ", ")))
		return 2
	case len(found) == 1:
		inst = &Installation{Installation: found[0]}
		cmd.Namespace = inst.Namespace // --namespace, if given, chose it
		published := map[string]string{"source-namespaces": inst.SourceNamespaces,
			"exclude-namespaces": inst.ExcludeNamespaces, "compat": inst.Compat, "reload-resources": inst.ReloadResources}
		for name, v := range map[string]*string{"source-namespaces": &cmd.SourceNS,
			"exclude-namespaces": &excludeNS, "compat": &compat, "reload-resources": &resources} {
			if given[name] {
				inst.Overridden = append(inst.Overridden, "--"+name)
			} else {
				*v = published[name]
			}
		}
		slices.Sort(inst.Overridden)
	}
	o, err := options(cmd.Namespace, cmd.SourceNS, excludeNS, compat, resources)
	if err != nil { // published settings this courier cannot read
		cmd.Fail(err)
		return 1
	}
	if inst != nil { // say what the report follows, overrides included
		inst.SourceNamespaces, inst.ExcludeNamespaces = o.SourceNamespaces.String(), o.ExcludeNamespaces.String()
		inst.Compat, inst.ReloadResources = o.Compat.String(), o.resources.String()
	}
	if err := printStatus(ctx, cmd, o, inst, sa, stdout); err != nil {
		cmd.Fail(err)
		return 1
	}
	return 0
}

// options are the report's Options from the flags' values, and the custom
// kinds.
func options(namespace, sourceNS, excludeNS, compat, resources string) (statusOptions, error) {
	var o statusOptions
	var errs []error
	var err error
	o.SourceNamespaces, o.ExcludeNamespaces, err = config.NamespaceGlobs(sourceNS, excludeNS, namespace)
	errs = append(errs, err)
	o.Installation = namespace
	if compat != "" {
		errs = append(errs, prefix("--compat", o.Compat.Set(compat)))
	}
	if resources != "" {
		errs = append(errs, prefix("--reload-resources", o.resources.Set(resources)))
	}
	return o, errors.Join(errs...)
}

func prefix(flag string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}

// statusOptions are Options and the custom kinds to check.
type statusOptions struct {
	Options
	resources workload.Resources
}

func printStatus(ctx context.Context, cmd *config.Subcommand, o statusOptions, inst *Installation, sa string, w io.Writer) error {
	client, meta, err := cmd.Clients()
	if err != nil {
		return err
	}
	c, err := Collect(ctx, client, meta, o.Compat)
	if err != nil {
		return err
	}
	r := Build(c, o.Options)
	r.Installation = inst
	r.CustomKinds = CheckKinds(ctx, client, o.Installation, sa, o.resources)
	if cmd.Output == "json" {
		return r.WriteJSON(w)
	}
	return r.WriteTable(w)
}
