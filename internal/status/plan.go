package status

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/courier-k8s/courier/internal/settings"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Plan is what a change of one Secret or ConfigMap would do now, as courier
// plan prints it: the workloads that would roll out, wave by wave, and the
// consumers that would not, each with the reason courier's decision gives.
type Plan struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Replicas: for a source, the namespaces holding its replicas, whose
	// consumers the change reaches as well.
	Replicas     []string   `json:"replicas,omitempty"`
	Waves        []PlanWave `json:"waves"`
	NotRolledOut []Consumer `json:"notRolledOut"`
}

// PlanWave is the workloads that would roll out in one wave, in order.
type PlanWave struct {
	Wave      int        `json:"wave"`
	Workloads []Consumer `json:"workloads"`
}

// What a consumer's verdict says when it rolls out for the change.
var rollsOut = map[string]bool{"rolls out": true, "waits for an earlier wave": true, "recreates the Job": true}

// PlanMain is `courier plan <kind>/<name> -n <namespace>`: what a change of
// that Secret or ConfigMap would do now, read with the user's kubeconfig
// as courier status reads, writing nothing. It returns the exit code: 0, 1
// when the cluster could not be read or the object is not there, 2 on bad
// arguments.
func PlanMain(args []string, getenv func(string) string, stdout, stderr io.Writer, preview Preview) int {
	usage := "Usage: courier plan <secret|configmap>/<name> -n <namespace> [flags]"
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "-help") {
			fmt.Fprintln(stderr, usage)
			return 0
		}
		fmt.Fprintf(stderr, "courier plan: name the object first: %s\n", usage)
		return 2
	}
	kind, name, err := planTarget(args[0])
	if err != nil {
		fmt.Fprintf(stderr, "courier plan: %v\n", err)
		return 2
	}
	ctx := context.Background()
	var namespace string
	rn, code, ok := start(ctx, "plan", "Prints what a change of the Secret or ConfigMap named first would do now, without writing anything:\nevery workload that would roll out, grouped by rollout wave in order, and every consumer that would\nnot, with the reason courier's decision gives. For a source, the consumers of its replicas too. It\nfollows the running courier's settings as courier status does.", args[1:], getenv, stderr,
		func(fs *flag.FlagSet) {
			fs.StringVar(&namespace, "n", "default", "the namespace of the Secret or ConfigMap")
		})
	if !ok {
		return code
	}
	p, err := rn.plan(ctx, kind, namespace, name, preview)
	if err != nil {
		rn.cmd.Fail(err)
		return 1
	}
	return rn.print(stdout, p, p.WriteTable)
}

// planTarget reads <kind>/<name>: kind secret or configmap.
func planTarget(arg string) (kind, name string, err error) {
	k, name, ok := strings.Cut(arg, "/")
	switch strings.ToLower(k) {
	case "secret", "secrets":
		kind = wellknown.KindSecret
	case "configmap", "configmaps", "cm":
		kind = wellknown.KindConfigMap
	default:
		return "", "", fmt.Errorf("%q: want secret/<name> or configmap/<name>", arg)
	}
	if !ok || name == "" {
		return "", "", fmt.Errorf("%q: want secret/<name> or configmap/<name>", arg)
	}
	return kind, name, nil
}

// plan is the Plan of a change of kind namespace/name.
func (rn *run) plan(ctx context.Context, kind, namespace, name string, preview Preview) (Plan, error) {
	p := Plan{Kind: kind, Namespace: namespace, Name: name, Waves: []PlanWave{}, NotRolledOut: []Consumer{}}
	found := slices.ContainsFunc(rn.cluster.Objects, func(o Object) bool {
		return o.Kind == kind && o.Meta.GetNamespace() == namespace && o.Meta.GetName() == name
	})
	if !found {
		return p, fmt.Errorf("%s %s/%s is not there, or not in what courier sees (%s)", kind, namespace, name, orAll(scopeNote(rn.o.scope)))
	}
	changed := map[string]bool{objKey(kind, namespace, name): true}
	r := Report{Sources: []Source{{Kind: kind, Namespace: namespace, Name: name}}}
	for _, s := range Build(rn.cluster, rn.o.Options).Sources {
		if s.Kind == kind && s.Namespace == namespace && s.Name == name {
			r.Sources[0] = s // a source: the consumers of its replicas too
		}
	}
	if len(r.Sources[0].Consumers) == 0 {
		r.Sources[0].Consumers = consumersOf(rn.cluster, rn.o.Options, kind, name, func(ns string) bool { return ns == namespace })
	}
	source := namespace + "/" + name
	for _, o := range rn.cluster.Objects {
		if o.Kind == kind && o.Meta.GetName() == name && o.Meta.GetAnnotations()[wellknown.Source] == source {
			changed[objKey(kind, o.Meta.GetNamespace(), name)] = true
			p.Replicas = append(p.Replicas, o.Meta.GetNamespace())
		}
	}
	slices.Sort(p.Replicas)
	if preview == nil {
		return p, fmt.Errorf("this courier binary cannot ask the reloader's decision")
	}
	if err := rn.verdicts(ctx, &r, changed, preview); err != nil {
		return p, err
	}
	byWave := map[int][]Consumer{}
	for _, c := range r.Sources[0].Consumers {
		if c.Verdict != nil && rollsOut[c.Verdict.Verdict] {
			w := max(c.Verdict.Wave, 0) // in no wave: rolls out at once, as wave 0
			byWave[w] = append(byWave[w], c)
		} else {
			p.NotRolledOut = append(p.NotRolledOut, c)
		}
	}
	for _, w := range slices.Sorted(maps.Keys(byWave)) {
		p.Waves = append(p.Waves, PlanWave{Wave: w, Workloads: byWave[w]})
	}
	return p, nil
}

func orAll(note string) string {
	if note == "" {
		return "courier sees every namespace"
	}
	return note
}

// WriteTable writes the plan for people.
func (p Plan) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "A change of %s %s/%s now", p.Kind, p.Namespace, p.Name)
	if len(p.Replicas) > 0 {
		fmt.Fprintf(tw, " (a source: its replicas in %s change with it)", strings.Join(p.Replicas, ", "))
	}
	fmt.Fprintln(tw, ":")
	if len(p.Waves) == 0 {
		fmt.Fprintln(tw, "\nRolls nothing out.")
	}
	for i, wave := range p.Waves {
		when := "at once"
		if i > 0 {
			when = fmt.Sprintf("once wave %d is healthy on it", p.Waves[i-1].Wave)
		}
		fmt.Fprintf(tw, "\nWave %d rolls out %s:\n", wave.Wave, when)
		for _, c := range wave.Workloads {
			fmt.Fprintf(tw, "  %s %s/%s\t(%s)\n", c.Kind, c.Namespace, c.Name, c.Input)
		}
	}
	if len(p.NotRolledOut) > 0 {
		fmt.Fprintln(tw, "\nNot rolled out:")
		slices.SortStableFunc(p.NotRolledOut, func(a, b Consumer) int { return cmp.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name) })
		for _, c := range p.NotRolledOut {
			v := Verdict{Verdict: "cannot tell"}
			if c.Verdict != nil {
				v = *c.Verdict
			}
			fmt.Fprintf(tw, "  %s %s/%s\t%s: %s\n", c.Kind, c.Namespace, c.Name, v.Verdict, v.Message)
		}
	}
	fmt.Fprintf(tw, "\nNothing was written. It follows the settings courier published (%s); a budget (--reload-max-in-flight) may space the rollouts further.\n", settings.Name)
	return tw.Flush()
}
