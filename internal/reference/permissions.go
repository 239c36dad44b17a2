package reference

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// permissionNotes says, for each permission courier's RBAC may grant (by
// "group/resource verb", the core group as "core"), what courier uses it
// for and what a compromised courier could do with it. A permission the
// manifests grant without a note here fails the generation, and so does a
// note no manifest grants.
var permissionNotes = map[string]struct{ why, risk string }{
	"core/secrets list":                 {"informers: sources, replicas, consumed inputs; reading by name an input the cache holds the metadata of only", "read every Secret's values (Helm release Secrets are left out by courier's field selector, not by the RBAC)"},
	"core/secrets watch":                {"informers", "read every Secret's values as they change"},
	"core/secrets create":               {"replicas, backups, restored protected sources", "create any Secret, e.g. a `kubernetes.io/service-account-token` Secret, which the API server fills with a token of any ServiceAccount in that namespace: act as that ServiceAccount"},
	"core/secrets update":               {"replicas kept equal to their sources", "overwrite any Secret: credentials, TLS keys, registry credentials"},
	"core/secrets patch":                {"replicas; with `--compat`, filling objects that pull (their content only)", "overwrite any Secret"},
	"core/secrets delete":               {"replicas removed; a replica recreated on a type or immutable change", "delete any Secret: an outage of what uses it"},
	"core/secrets override":             {"the guard policy lets writes to replicas and protected sources through only with this verb", "what create, update, patch and delete allow, past the guard policy"},
	"core/configmaps list":              {"informers; reading by name an input the cache holds the metadata of only", "read every ConfigMap"},
	"core/configmaps watch":             {"informers", "read every ConfigMap as it changes"},
	"core/configmaps create":            {"replicas, backups, courier-settings", "create any ConfigMap"},
	"core/configmaps update":            {"replicas kept equal to their sources", "overwrite any ConfigMap: the configuration of any application, kube-system's included"},
	"core/configmaps patch":             {"replicas; pulls", "overwrite any ConfigMap"},
	"core/configmaps delete":            {"replicas removed", "delete any ConfigMap"},
	"core/configmaps override":          {"the guard policy's verb", "what create, update, patch and delete allow, past the guard policy"},
	"core/configmaps get":               {"`courier status`'s settings, read by name (`courier-settings` only)", "read its own settings"},
	"core/namespaces list":              {"namespace labels decide where replicas go", "see every namespace and its labels"},
	"core/namespaces watch":             {"namespace labels", "see every namespace as it changes"},
	"core/namespaces get":               {"the namespace-scoped mode reads each watched namespace's own object by name", "see that namespace's labels"},
	"core/events create":                {"Events on the objects courier acts on", "write misleading Events in any namespace"},
	"core/events patch":                 {"repeated Events counted, not duplicated", "rewrite any Event"},
	"apps/deployments list":             {"the reloader's informers", "read every Deployment's pod template (inline env values included)"},
	"apps/deployments watch":            {"the reloader's informers", "the same, as it changes"},
	"apps/deployments patch":            {"a rollout: one annotation in the pod template; the baseline", "change any Deployment's pod template: run any image and command in any namespace, as that workload's ServiceAccount, with its volumes"},
	"apps/statefulsets list":            {"the reloader's informers", "read every StatefulSet's pod template"},
	"apps/statefulsets watch":           {"the reloader's informers", "the same, as it changes"},
	"apps/statefulsets patch":           {"a rollout; the baseline", "change any StatefulSet's pod template: run any image, with its volumes"},
	"apps/daemonsets list":              {"the reloader's informers", "read every DaemonSet's pod template"},
	"apps/daemonsets watch":             {"the reloader's informers", "the same, as it changes"},
	"apps/daemonsets patch":             {"a rollout; the baseline", "change any DaemonSet's pod template: run any image on every node it selects, with its host access"},
	"batch/cronjobs list":               {"the reloader's informers", "read every CronJob's job template"},
	"batch/cronjobs watch":              {"the reloader's informers", "the same, as it changes"},
	"batch/cronjobs patch":              {"the next Job created from the new template; the baseline", "change any CronJob's template: run any image on its schedule"},
	"batch/jobs list":                   {"the reloader's informers", "read every Job's pod template"},
	"batch/jobs watch":                  {"the reloader's informers", "the same, as it changes"},
	"batch/jobs patch":                  {"a Job's baseline", "change a Job's metadata (its pod template cannot change)"},
	"batch/jobs get":                    {"a Job that opts in is recreated (its pod template cannot change): read whole first", "read any Job"},
	"batch/jobs create":                 {"the Job recreated (tried first with a dry run)", "create a Job in any namespace: run any image as any ServiceAccount there, within what Pod Security admission allows"},
	"batch/jobs delete":                 {"the old Job deleted before it is recreated", "delete any Job, and with it its pods"},
	"coordination.k8s.io/leases create": {"leader election: the Lease created", "create Leases in courier's namespace"},
	"coordination.k8s.io/leases get":    {"leader election (the Lease `courier` only)", "read its own Lease"},
	"coordination.k8s.io/leases update": {"leader election: the Lease renewed (`courier` only)", "hold leadership, so that no other courier replica leads"},
}

// Permission is one verb on one resource a Role or ClusterRole grants.
type Permission struct {
	Role, Scope, Group, Resource, Verb string
	Names                              []string // resourceNames, if the rule is limited to them
}

func (p Permission) key() string {
	g := p.Group
	if g == "" {
		g = "core"
	}
	return g + "/" + p.Resource + " " + p.Verb
}

// Granted is every permission the ClusterRoles and Roles of a manifest
// grant, but for those of the roles named in skip.
func Granted(manifest []byte, skip ...string) ([]Permission, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []Permission
	for {
		var obj struct {
			Kind     string
			Metadata struct{ Name, Namespace string }
			Rules    []rbacv1.PolicyRule
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if (obj.Kind != "ClusterRole" && obj.Kind != "Role") || slices.Contains(skip, obj.Metadata.Name) {
			continue
		}
		scope := "cluster-wide"
		switch {
		case obj.Kind == "Role" && obj.Metadata.Namespace != "":
			scope = "namespace " + obj.Metadata.Namespace
		case obj.Kind == "Role":
			scope = "each namespace it is bound in"
		}
		for _, r := range obj.Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out = append(out, Permission{Role: obj.Kind + " " + obj.Metadata.Name, Scope: scope, Group: g, Resource: res, Verb: v, Names: r.ResourceNames})
					}
				}
			}
		}
	}
}

// PermissionTable is the Markdown table of perms, one row per permission,
// with what courier uses it for and its blast radius. It fails naming any
// permission without a note.
func PermissionTable(perms []Permission) (string, error) {
	var b strings.Builder
	b.WriteString("| # | role | scope | API group | resource | verb | what courier uses it for | what a compromised courier could do with it |\n|---|---|---|---|---|---|---|---|\n")
	var missing []string
	for i, p := range perms {
		n, ok := permissionNotes[p.key()]
		if !ok {
			missing = append(missing, p.key())
			continue
		}
		g := p.Group
		if g == "" {
			g = `""`
		}
		res := p.Resource
		if len(p.Names) > 0 {
			res += " (only " + strings.Join(p.Names, ", ") + ")"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | `%s` | %s | %s | %s | %s |\n", i+1, p.Role, p.Scope, g, res, p.Verb, n.why, n.risk)
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("permissions granted without a note in internal/reference/permissions.go: %s", strings.Join(missing, ", "))
	}
	return b.String(), nil
}

// CheckNotes fails naming every note that no permission in perms uses.
func CheckNotes(perms ...[]Permission) error {
	used := map[string]bool{}
	for _, ps := range perms {
		for _, p := range ps {
			used[p.key()] = true
		}
	}
	var unused []string
	for k := range permissionNotes {
		if !used[k] {
			unused = append(unused, k)
		}
	}
	slices.Sort(unused)
	if len(unused) > 0 {
		return fmt.Errorf("notes in internal/reference/permissions.go for permissions no manifest grants: %s", strings.Join(unused, ", "))
	}
	return nil
}

// Splice returns doc with what lies between the lines `<!-- begin NAME -->`
// and `<!-- end NAME -->` replaced by body.
func Splice(doc []byte, name, body string) ([]byte, error) {
	begin, end := "<!-- begin "+name+" -->\n", "<!-- end "+name+" -->"
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("no %q … %q section", strings.TrimSpace(begin), end)
	}
	i += len(begin)
	return slices.Concat(doc[:i], []byte(body), doc[j:]), nil
}
