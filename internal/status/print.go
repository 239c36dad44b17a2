package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/courier-k8s/courier/internal/settings"
)

// WriteTable writes one table of sources and one of their consumers, and
// one of the custom kinds courier is given.
func (r Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	if i := r.Installation; i != nil {
		fmt.Fprintf(tw, "Installation %s: %s, settings published %s: --source-namespaces=%s", i.Namespace, i.Version, i.Published.UTC().Format(time.RFC3339), i.SourceNamespaces)
		for _, f := range [][2]string{{"exclude-namespaces", i.ExcludeNamespaces}, {"compat", i.Compat}, {"reload-resources", i.ReloadResources}} {
			if f[1] != "" {
				fmt.Fprintf(tw, " --%s=%s", f[0], f[1])
			}
		}
		if i.ReloadAll {
			fmt.Fprint(tw, " --reload-all")
		}
		if len(i.Overridden) > 0 {
			fmt.Fprintf(tw, " (overridden here: %s)", strings.Join(i.Overridden, ", "))
		}
		if i.NotRunning != "" {
			fmt.Fprintf(tw, "\nNo courier seems to run there (%s): these settings may be stale.", i.NotRunning)
		}
		fmt.Fprint(tw, "\n\n")
	} else {
		fmt.Fprintf(tw, "No courier installation published its settings (ConfigMap %s): reporting with the flags given here and their defaults.\n\n", settings.Name)
	}
	if r.Scope != "" {
		fmt.Fprintf(tw, "Scope: %s.\n\n", r.Scope)
	}
	if len(r.CustomKinds) > 0 {
		fmt.Fprintln(tw, "CUSTOM KIND	COURIER MAY WATCH	NOTE")
		for _, k := range r.CustomKinds {
			may := "unknown"
			if k.MayWatch != nil {
				may = map[bool]string{true: "yes", false: "NO"}[*k.MayWatch]
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", k.Resource, may, k.Problem)
		}
		fmt.Fprintln(tw)
	}
	if len(r.Clusters) > 0 {
		fmt.Fprintln(tw, "CLUSTER\tSECRET\tREACHABLE\tIN-SYNC\tLAST ERROR")
		for _, c := range r.Clusters {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d/%d\t%s\n", c.Name, c.Secret, map[bool]string{true: "yes", false: "NO"}[c.Reachable], c.InSync, c.Total, c.Error)
		}
		fmt.Fprintln(tw)
	}
	if r.ClustersNote != "" {
		fmt.Fprintf(tw, "Clusters: %s.\n\n", r.ClustersNote)
	}
	if len(r.Sources) == 0 {
		fmt.Fprintln(tw, "No sources: no Secret or ConfigMap carries courier.dev/replicate-to.")
		return tw.Flush()
	}
	fmt.Fprintln(tw, "SOURCE\tKIND\tSELECTOR\tKEYS\tCOPIES\tTARGETS\tIN-SYNC\tCONFLICT\tERROR\tNOTE")
	for _, s := range r.Sources {
		sel := s.Selector
		if sel == "" {
			sel = `""`
		}
		keys := s.Keys
		if keys == "" {
			keys = "all"
		}
		var copies []string
		if s.CopyLabels != "" {
			copies = append(copies, "labels: "+s.CopyLabels)
		}
		if s.CopyAnnotations != "" {
			copies = append(copies, "annotations: "+s.CopyAnnotations)
		}
		if copies == nil {
			copies = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\n", s.Ref(), s.Kind, sel, keys, strings.Join(copies, "; "),
			s.Targets, s.InSync, s.Conflict, s.Error, s.Problem)
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "CONSUMER\tINPUT\tFROM SOURCE\tLAST RELOAD\tRELOADED FOR\tVERDICT\tWHY")
	n := 0
	for _, s := range r.Sources {
		for _, c := range s.Consumers {
			at, why := c.ReloadedAt, c.ReloadedFor
			if at == "" {
				at, why = "never", "-"
			}
			input := s.Kind + " " + c.Input
			if c.NamedBy != "" {
				input += " (named in " + c.NamedBy + ")"
			}
			consumer := c.Kind + " " + c.Namespace + "/" + c.Name
			if c.NotifyOnly {
				consumer += " (notify only)"
			}
			verdict, because := "-", "-"
			if v := c.Verdict; v != nil {
				verdict, because = v.Verdict, v.Message
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", consumer, input, s.Ref(), at, why, verdict, because)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintln(tw, "(no workload consumes a source or a replica)")
	}
	if len(r.Changes) > 0 {
		fmt.Fprintln(tw)
		fmt.Fprintln(tw, "CHANGE OF\tWAVE\tSTATE\tWORKLOADS")
		for _, c := range r.Changes {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", c.Source, c.Wave, c.State, strings.Join(c.Workloads, ", "))
		}
	}
	return tw.Flush()
}
