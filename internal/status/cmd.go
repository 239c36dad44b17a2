package status

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/config"
	"github.com/courier-k8s/courier/internal/settings"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/view"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Main is `courier status`: it reads the cluster with the user's
// kubeconfig and prints every source's replication and its consumers'
// reloads, as the running courier does them: it reads the settings that
// courier's leader published (package settings), and a flag given wins. It
// returns the exit code: 0, 1 when the cluster could not be read, 2 on bad
// flags or when several installations leave it to --namespace to choose.
// preview (nil: none) is the reloader's decision, asked for each consumer's
// verdict (Verdicts).
func Main(args []string, getenv func(string) string, stdout, stderr io.Writer, preview Preview) int {
	ctx := context.Background()
	rn, code, ok := start(ctx, "status", "Prints, per source, its selector, the namespaces it targets and how many hold a replica in sync,\nare blocked by a conflict or are in error, then the last reload of each workload consuming it.\nIt reports what the running courier does: it reads the settings its leader publishes (ConfigMap\n"+settings.Name+" in courier's namespace); a flag given here (or its COURIER_* variable) wins. With several\ninstallations running, --namespace picks one.", args, getenv, stderr, nil)
	if !ok {
		return code
	}
	r := Build(rn.cluster, rn.o.Options)
	if preview != nil {
		if err := rn.verdicts(ctx, &r, nil, preview); err != nil {
			rn.cmd.Fail(err)
			return 1
		}
	}
	r.Changes = inProgress(r.Sources)
	r.Installation = rn.inst
	r.Scope = scopeNote(rn.o.scope)
	r.CustomKinds = CheckKinds(ctx, rn.client, rn.o.Installation, rn.f.sa, rn.o.resources, rn.o.scope)
	hub := wellknown.DefaultClusterName
	if rn.inst != nil && rn.inst.ClusterName != "" {
		hub = rn.inst.ClusterName
	}
	var err error
	if r.Clusters, err = Clusters(ctx, rn.client, rn.cluster, rn.o.Options, hub); err != nil {
		r.ClustersNote = err.Error()
	}
	return rn.print(stdout, r, r.WriteTable)
}

// print writes v as -o asks: indented JSON, or table's text. It returns
// the exit code.
func (rn *run) print(stdout io.Writer, v any, table func(io.Writer) error) int {
	var err error
	if rn.cmd.Output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		err = enc.Encode(v)
	} else {
		err = table(stdout)
	}
	if err != nil {
		rn.cmd.Fail(err)
		return 1
	}
	return 0
}

// run is what status and plan read before they report: the flags, the
// installation they follow, and the cluster as that courier sees it.
type run struct {
	cmd     *config.Subcommand
	f       flags
	o       statusOptions
	inst    *Installation
	client  kubernetes.Interface
	meta    metadata.Interface
	cluster Cluster
}

// start parses subcommand name's flags (more: its own), finds the
// installation and collects the cluster. When it returns false the
// subcommand ends with the code.
func start(ctx context.Context, name, usage string, args []string, getenv func(string) string, stderr io.Writer, more func(*flag.FlagSet)) (*run, int, bool) {
	cmd := config.NewSubcommand(name, usage, stderr)
	rn := &run{cmd: cmd}
	f := &rn.f
	var resources workload.Resources
	cmd.Flags.Var(&resources, "reload-resources", "as courier's flag: the custom kinds it reloads (status says whether courier may watch each)")
	cmd.Flags.StringVar(&f.sa, "service-account", "courier", "courier's ServiceAccount, in --namespace (for --reload-resources)")
	cmd.Flags.StringVar(&f.excludeNS, "exclude-namespaces", "", "as courier's flag: namespaces never replicated into")
	cmd.Flags.StringVar(&f.compat, "compat", "", "as courier's flag: the other tools whose annotations make sources ("+strings.Join(source.Tools, ", ")+")")
	if more != nil {
		more(cmd.Flags)
	}
	code, ok := cmd.Parse(args, getenv, func() error {
		f.namespace, f.sourceNS, f.resources = cmd.Namespace, cmd.SourceNS, resources.String()
		f.watchNS, f.labels = cmd.WatchNS, cmd.ResourceLabels
		_, err := f.options()
		return err
	})
	if !ok {
		return nil, code, false
	}
	given := map[string]bool{}
	cmd.Flags.Visit(func(fl *flag.Flag) { given[fl.Name] = true })

	var err error
	if rn.client, rn.meta, err = cmd.Clients(); err != nil {
		cmd.Fail(err)
		return nil, 1, false
	}
	rn.inst, code, err = installation(ctx, rn.client, given, f, stderr)
	if err != nil {
		cmd.Fail(err)
		return nil, code, false
	}
	if rn.o, err = f.options(); err != nil { // what an installation published, that this courier cannot read
		cmd.Fail(fmt.Errorf("the settings published in %s/%s: %w", f.namespace, settings.Name, err))
		return nil, 1, false
	}
	if inst := rn.inst; inst != nil { // say what the report follows, overrides included
		inst.SourceNamespaces, inst.ExcludeNamespaces = rn.o.SourceNamespaces.String(), rn.o.ExcludeNamespaces.String()
		inst.Compat, inst.ReloadResources = rn.o.Compat.String(), rn.o.resources.String()
		inst.WatchNamespaces, inst.ResourceLabels = strings.Join(rn.o.scope.Namespaces, ","), rn.o.scope.ResourceLabels
	}
	if rn.cluster, err = Collect(ctx, rn.client, rn.meta, rn.o.Compat, rn.o.scope); err != nil {
		cmd.Fail(err)
		return nil, 1, false
	}
	rn.o.NotifyOnly = rn.inst != nil && rn.inst.ReloadMode == "notify"
	return rn, 0, true
}

// verdicts sets the verdict of every consumer in r, as if the objects
// changed (kind/namespace/name) had new content.
func (rn *run) verdicts(ctx context.Context, r *Report, changed map[string]bool, preview Preview) error {
	v, err := view.New(rn.o.scope.Namespaces, rn.o.scope.ResourceLabels, nil)
	if err != nil {
		return err
	}
	dyn, err := rn.cmd.Dynamic()
	if err != nil {
		return err
	}
	inst := rn.inst
	Verdicts(ctx, rn.client, dyn, r, rn.cluster, rn.o.scope, Reloading{Installation: rn.o.Installation, Compat: rn.o.Compat.Reloader, ReloadAll: inst != nil && inst.ReloadAll,
		NotifyOnly: rn.o.NotifyOnly, Rollouts: slices.ContainsFunc(rn.o.resources, func(r workload.Resource) bool { return r.GroupResource == workload.Rollouts }),
		CSI: inst != nil && inst.ReloadCSI, Roles: rn.o.roles(), View: v, Finder: informers.NewFinder(rn.meta), Changed: changed}, preview)
	return nil
}

// flags are the values of status's flags that decide the report.
type flags struct {
	namespace, sourceNS, excludeNS, compat, resources, sa string
	watchNS, labels                                       string
}

// installation finds the installation the report follows, and sets the
// flags not given from its settings: the one whose namespace --namespace
// names, else the one running (several: an error listing them, code 2), else
// the one there is (none: nil, and the flags stand alone). ConfigMaps it
// cannot read are named on stderr.
func installation(ctx context.Context, client kubernetes.Interface, given map[string]bool, f *flags, stderr io.Writer) (*Installation, int, error) {
	scope := ""
	if given["namespace"] {
		scope = f.namespace
	}
	found, skipped, err := settings.List(ctx, client, scope)
	if err != nil {
		return nil, 1, err
	}
	for _, s := range skipped {
		fmt.Fprintf(stderr, "courier status: ignoring settings it cannot read: %s\n", s)
	}
	var running []settings.Installation
	for i := range found {
		settings.CheckRunning(ctx, client, &found[i], time.Now())
		if found[i].NotRunning == "" {
			running = append(running, found[i])
		}
	}
	if len(running) > 0 {
		found = running
	}
	switch {
	case len(found) == 0:
		return nil, 0, nil
	case len(found) > 1:
		var names []string
		for _, i := range found {
			names = append(names, fmt.Sprintf("%s (%s; --source-namespaces=%s)", i.Namespace, i.Version, i.SourceNamespaces))
		}
		return nil, 2, fmt.Errorf("%d courier installations run here: %s; choose one with --namespace", len(found), strings.Join(names, ", "))
	}
	inst := &Installation{Installation: found[0]}
	f.namespace = inst.Namespace // --namespace, if given, chose it
	for _, p := range []struct {
		flag      string
		value     *string
		published string
	}{
		{"source-namespaces", &f.sourceNS, inst.SourceNamespaces}, {"exclude-namespaces", &f.excludeNS, inst.ExcludeNamespaces},
		{"compat", &f.compat, inst.Compat}, {"reload-resources", &f.resources, inst.ReloadResources},
		{"watch-namespaces", &f.watchNS, inst.WatchNamespaces}, {"resource-label-selector", &f.labels, inst.ResourceLabels},
	} {
		if given[p.flag] {
			inst.Overridden = append(inst.Overridden, "--"+p.flag)
		} else {
			*p.value = p.published
		}
	}
	slices.Sort(inst.Overridden)
	return inst, 0, nil
}

// statusOptions are Options and the custom kinds to check.
type statusOptions struct {
	Options
	resources workload.Resources
	scope     informers.Scope
}

// options are the report's Options from the flags' values.
func (f flags) options() (statusOptions, error) {
	var o statusOptions
	var err error
	o.SourceNamespaces, o.ExcludeNamespaces, err = config.NamespaceGlobs(f.sourceNS, f.excludeNS, f.namespace)
	errs := []error{err}
	o.Installation = f.namespace
	if f.compat != "" {
		errs = append(errs, prefix("--compat", o.Compat.Set(f.compat)))
	}
	if f.resources != "" {
		errs = append(errs, prefix("--reload-resources", o.resources.Set(f.resources)))
	}
	if err == nil {
		o.scope.Namespaces, err = config.WatchNamespaces(f.watchNS, o.SourceNamespaces, f.namespace)
		errs = append(errs, err, config.CheckResourceLabelSelector(f.labels))
		o.scope.ResourceLabels = f.labels
	}
	return o, errors.Join(errs...)
}

// scopeNote says what a scoped courier does not see ("" for none).
func scopeNote(sc informers.Scope) string {
	var parts []string
	if len(sc.Namespaces) > 0 {
		parts = append(parts, "courier watches only the namespaces "+strings.Join(sc.Namespaces, ", ")+": nothing elsewhere is a source, a target or reloaded")
	}
	if sc.ResourceLabels != "" {
		parts = append(parts, "outside courier's namespace it sees only the Secrets and ConfigMaps matching "+sc.ResourceLabels+
			": a source or consumed input without those labels is not seen, so it is neither replicated nor reloaded for")
	}
	return strings.Join(parts, "; ")
}

func prefix(flag string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", flag, err)
	}
	return nil
}
