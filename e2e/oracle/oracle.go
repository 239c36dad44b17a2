// Package oracle judges what courier did from the API server's audit log
// alone, with no assertion of the test that drove it: every write courier's
// identity made must be one docs/SPEC.md allows (Check), and once the
// cluster is settled courier writes nothing (Writes).
//
// It reads the JSON lines kube-apiserver writes under Policy and rebuilds,
// from every write anyone made, each object's state before each of
// courier's writes, so that "courier only writes what it owns" is judged on
// the object as courier found it. It shares no code with courier: the rules
// are written from the spec.
package oracle

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Policy is the audit policy Check needs: every write, with the objects
// written (RequestResponse) for the kinds courier writes and their Events
// (their status too: a Deployment's revision annotation comes that way)
// and for Namespaces (their labels decide where replicas belong),
// the metadata of every other write (courier writing anything else is a
// violation), and nothing for reads or the fake node's pod and node churn.
// A request's RequestReceived stage is kept too: one that never completes
// (kube-apiserver killed while etcd may have applied it) is a write whose
// outcome the log cannot tell.
const Policy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [ResponseStarted]
rules:
- level: None
  verbs: [get, list, watch]
- level: None
  users: [admin]
  resources:
  - group: ""
    resources: [pods, pods/status, nodes, nodes/status, endpoints, serviceaccounts/token]
  - group: apps
    resources: [replicasets, replicasets/status, controllerrevisions]
  - group: coordination.k8s.io
  - group: discovery.k8s.io
- level: RequestResponse
  resources:
  - group: ""
    resources: [secrets, configmaps, events, namespaces]
  - group: events.k8s.io
  - group: apps
    resources: [deployments, statefulsets, daemonsets, deployments/status, statefulsets/status, daemonsets/status]
  - group: batch
    resources: [jobs, cronjobs, jobs/status, cronjobs/status]
  - group: argoproj.io
- level: Metadata
`

// Event is one audit event, as much of it as the checks read.
type Event struct {
	AuditID string `json:"auditID"`
	Stage   string `json:"stage"`
	Verb    string `json:"verb"`
	URI     string `json:"requestURI"`
	// UserAgent is the client's (courier's own: "courier/…").
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	Impersonated *struct {
		Username string `json:"username"`
	} `json:"impersonatedUser"`
	Ref *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	Status *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Request  json.RawMessage `json:"requestObject"`
	Response json.RawMessage `json:"responseObject"`
	At       time.Time       `json:"stageTimestamp"`
}

// Username is who the request acted as: the impersonated user if any.
func (e Event) Username() string {
	if e.Impersonated != nil {
		return e.Impersonated.Username
	}
	return e.User.Username
}

func (e Event) writeVerb() bool {
	switch e.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return e.Ref != nil
	}
	return false
}

// Write reports whether e is a write that succeeded.
func (e Event) Write() bool {
	return e.writeVerb() && e.Status != nil && e.Status.Code/100 == 2
}

// Uncertain reports whether e is a write whose outcome the log cannot tell:
// it never completed (kube-apiserver stopped first) or failed with a server
// error (etcd killed or timing out): etcd may have applied it all the same.
func (e Event) Uncertain() bool {
	return e.writeVerb() && (e.Stage == "RequestReceived" || e.Status != nil && e.Status.Code >= 500)
}

// String names the request, for a violation.
func (e Event) String() string {
	return fmt.Sprintf("%s %s (audit %s at %s)", strings.ToUpper(e.Verb), e.URI, e.AuditID, e.At.Format("15:04:05.000"))
}

// Read parses an audit log (one JSON event per line), keeping the
// ResponseComplete events, and in its place the RequestReceived event of a
// write that never completed.
func Read(r io.Reader) ([]Event, error) {
	var all []Event
	done := map[string]bool{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var e Event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("audit log: %w", err)
		}
		switch e.Stage {
		case "ResponseComplete", "Panic":
			done[e.AuditID] = true
			all = append(all, e)
		case "RequestReceived":
			if e.writeVerb() {
				all = append(all, e)
			}
		}
	}
	out := slices.DeleteFunc(all, func(e Event) bool {
		return e.Stage == "Panic" || e.Stage == "RequestReceived" && done[e.AuditID]
	})
	return out, sc.Err()
}

// Scope is what Check judges.
type Scope struct {
	// Courier is courier's user name (a ServiceAccount's).
	Courier string
	// Installation is courier's namespace (--namespace).
	Installation string
	// Namespaces are the namespaces of the scenario (courier's own included
	// or not); writes elsewhere are left out, since other tests share the
	// cluster.
	Namespaces map[string]bool
	// Values are Secret values that must appear in no Event.
	Values []string
	// ProtectedGap bounds how long a protected source may stay deleted
	// before courier restores it, counting only the time outside Outages;
	// 0 checks nothing (another scope of the same run checks it).
	ProtectedGap time.Duration
	// Outages are spans when the test had the API server down (restarted
	// it, or etcd): no controller can restore anything then.
	Outages []Span
}

// Span is a time span.
type Span struct{ From, To time.Time }

// serving is how much of [from, to] lies outside s.Outages.
func (s Scope) serving(from, to time.Time) time.Duration {
	d := to.Sub(from)
	for _, o := range s.Outages {
		if a, b := maxTime(from, o.From), minTime(to, o.To); b.After(a) {
			d -= b.Sub(a)
		}
	}
	return d
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// Violation is one broken rule, named with the request that broke it.
type Violation struct {
	Rule    string
	Request string
	At      time.Time // when the request was made; zero for a rule over the whole run
}

func (v Violation) String() string { return v.Rule + ": " + v.Request }

type key struct{ resource, namespace, name string }

// goneSource is a protected source deleted: when, and as it was.
type goneSource struct {
	at   time.Time
	last *object
}

// object is the part of an object the rules read.
type object struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
	raw map[string]any
}

// version is o's resourceVersion as a number (the API server's is etcd's
// revision), 0 when it has none.
func (o *object) version() uint64 {
	v, _ := strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
	return v
}

// inCommitOrder is events in the order their writes were committed. The
// audit log holds them in the order their requests completed, which is not
// always that: courier's patch of an object just created (resourceVersion
// 8757) was logged before the create (8755), by the second kube-apiserver.
// A successful write that returns an object is placed by its
// resourceVersion (etcd's revision, so one order across objects and API
// servers); any other event stays after the writes logged before it.
func inCommitOrder(events []Event) []Event {
	type placed struct {
		e   Event
		key uint64
	}
	ps := make([]placed, len(events))
	var last uint64
	for i, e := range events {
		key := last
		if o := parse(e.Response); o != nil && e.Write() && e.Verb != "delete" && o.version() > 0 {
			key = o.version()
		}
		last = max(last, key)
		ps[i] = placed{e, key}
	}
	slices.SortStableFunc(ps, func(a, b placed) int { return cmp.Compare(a.key, b.key) })
	out := make([]Event, len(ps))
	for i, p := range ps {
		out[i] = p.e
	}
	return out
}

func parse(b json.RawMessage) *object {
	if len(b) == 0 {
		return nil
	}
	var o object
	if json.Unmarshal(b, &o) != nil || json.Unmarshal(b, &o.raw) != nil {
		return nil
	}
	if k, _ := o.raw["kind"].(string); k == "Status" {
		return nil
	}
	return &o
}

// owned is the spec's "an object courier created": it carries one of
// courier's marks and names this installation or none.
func (o *object) owned(installation string) bool {
	if o == nil {
		return false
	}
	a, l := o.Metadata.Annotations, o.Metadata.Labels
	if inst, ok := a["courier.dev/installation"]; ok && inst != installation {
		return false
	}
	_, source := a["courier.dev/source"]
	return source || l["app.kubernetes.io/managed-by"] == "courier" || l["courier.dev/replica"] == "true"
}

func (o *object) protected() bool {
	return o != nil && o.Metadata.Labels["courier.dev/protect"] == "true"
}

// pulls reports whether o asks for a copy of a source (through
// kubernetes-replicator's or Reflector's annotation, under --compat).
func (o *object) pulls() bool {
	if o == nil {
		return false
	}
	for _, k := range []string{"replicator.v1.mittwald.de/replicate-from", "reflector.v1.k8s.emberstack.com/reflects"} {
		if o.Metadata.Annotations[k] != "" {
			return true
		}
	}
	return false
}

// optedInJob reports whether a Job opts in itself, the one way courier may
// delete and create it again.
func (o *object) optedInJob() bool {
	if o == nil {
		return false
	}
	a := o.Metadata.Annotations
	if a["courier.dev/reload"] == "true" || a["courier.dev/reload-on"] != "" {
		return true
	}
	for k := range a {
		if strings.HasSuffix(k, "reloader.stakater.com/reload") || strings.HasSuffix(k, "reloader.stakater.com/auto") {
			return true
		}
	}
	return false
}

// changedBeyond lists where a and b differ beyond what courier may write
// (none when they do not): the API server's own fields and status are
// ignored, and so is every annotation under courier.dev/ (and, with
// content, the data).
func changedBeyond(a, b *object, content bool) []string {
	if a == nil || b == nil {
		return []string{"the whole object"}
	}
	return differ(strip(a.raw, content), strip(b.raw, content), "")
}

// differ lists the paths where a and b differ.
func differ(a, b any, path string) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{path}
	}
	var out []string
	for k := range am {
		out = append(out, differ(am[k], bm[k], path+"."+k)...)
	}
	for k := range bm {
		if _, ok := am[k]; !ok {
			out = append(out, path+"."+k)
		}
	}
	slices.Sort(out)
	return out
}

func strip(v any, content bool) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range t {
			switch k {
			case "resourceVersion", "managedFields", "generation", "status", "creationTimestamp", "uid":
				continue
			case "data", "binaryData", "stringData":
				if content {
					continue
				}
			case "annotations":
				as := map[string]any{}
				all, _ := x.(map[string]any) // null: none
				for ak, av := range all {
					if !strings.HasPrefix(ak, "courier.dev/") {
						as[ak] = av
					}
				}
				if len(as) > 0 {
					out[k] = as
				}
				continue
			}
			out[k] = strip(x, content)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, x := range t {
			out[i] = strip(x, content)
		}
		return out
	}
	return v
}

// targets reports whether source (as last seen) wants a replica in a
// namespace labelled nsLabels: its courier.dev/replicate-to selector
// matches them ("*" or empty: every namespace). Unknown labels, or a
// source without courier's annotation (another tool's), count as wanted.
func targets(source *object, nsLabels map[string]string) bool {
	if source == nil || nsLabels == nil {
		return true
	}
	sel, ok := source.Metadata.Annotations["courier.dev/replicate-to"]
	if !ok || sel == "" || sel == "*" {
		return true
	}
	parsed, err := labels.Parse(sel)
	return err != nil || parsed.Matches(labels.Set(nsLabels))
}

var workloads = map[string]bool{"deployments": true, "statefulsets": true, "daemonsets": true, "cronjobs": true, "rollouts": true}

// Check replays events in order and returns every write by s.Courier that
// the spec does not allow, and every protected source left deleted longer
// than s.ProtectedGap (end is when the scenario was judged).
func Check(events []Event, s Scope, end time.Time) []Violation {
	vs, _ := CheckAll(events, s, end)
	return vs
}

// CheckAll is Check, and also returns courier's writes it could not judge:
// writes to an object whose state an uncertain write (Event.Uncertain)
// left unknown, until a write with a known outcome makes it known again.
func CheckAll(events []Event, s Scope, end time.Time) ([]Violation, []Event) {
	events = inCommitOrder(events)
	state := map[key]*object{}
	unknown := map[key]bool{}        // objects an uncertain write may have changed
	unknownCreates := map[key]bool{} // {resource, namespace}: an uncertain create whose name the log lacks
	gone := map[key]goneSource{}     // protected sources deleted
	deleted := map[key]*object{}     // objects deleted, as they were
	nsLabels := map[string]map[string]string{}
	var out []Violation
	var unjudged []Event
	bad := func(rule string, e Event) { out = append(out, Violation{Rule: rule, Request: e.String(), At: e.At}) }
	for _, e := range events {
		if e.Uncertain() && (s.Namespaces[e.Ref.Namespace] || e.Ref.Namespace == s.Installation) {
			k := key{e.Ref.Resource, e.Ref.Namespace, e.Ref.Name}
			if k.name == "" {
				unknownCreates[key{k.resource, k.namespace, ""}] = true
			} else {
				unknown[k] = true
			}
			continue
		}
		if !e.Write() {
			continue
		}
		if e.Ref.Resource == "namespaces" && e.Ref.Subresource == "" {
			if o := parse(e.Response); o != nil && e.Verb != "delete" {
				nsLabels[o.Metadata.Name] = o.Metadata.Labels
			}
		}
		ns := e.Ref.Namespace
		if !s.Namespaces[ns] && ns != s.Installation {
			continue
		}
		k := key{e.Ref.Resource, ns, e.Ref.Name}
		prior, result := state[k], parse(e.Response)
		if k.name == "" && result != nil {
			k.name = result.Metadata.Name
			prior = state[k]
		}
		// A deletion's event carries no version of its own commit, so it
		// may be placed before writes that preceded it. An update or
		// patch that succeeded after one found the object there: it
		// came before, and is judged against the object as it was.
		earlier := false
		if was, ok := deleted[k]; ok && prior == nil && (e.Verb == "update" || e.Verb == "patch") {
			prior, earlier = was, true
		}
		record := func(o *object) {
			if earlier {
				deleted[k] = o // still deleted after it
			} else {
				state[k] = o
			}
		}
		if sub := e.Ref.Subresource; sub != "" {
			// A status write returns the whole object: the metadata the
			// controllers write this way is part of what courier finds.
			if e.Username() == s.Courier {
				bad("wrote the "+sub+" of a "+k.resource, e)
			} else if sub == "status" && result != nil {
				record(result)
			}
			continue
		}
		// An unfinished create there may have made any object the log has
		// not shown: a write to one is not judged. A create is (it
		// succeeded, so no object of its name was there), and so is every
		// write to an object once a write of known outcome has shown it.
		uncertain := unknown[k] || prior == nil && e.Verb != "create" && unknownCreates[key{k.resource, k.namespace, ""}]
		if e.Username() == s.Courier {
			if uncertain {
				unjudged = append(unjudged, e)
			} else if rule := judge(e, k, prior, result, s, gone, nsLabels); rule != "" {
				bad(rule, e)
			}
		}
		delete(unknown, k)
		switch e.Verb {
		case "delete":
			if g, ok := gone[k]; ok && prior == nil {
				// Deleted again: it was back (restored by a write whose
				// outcome the log could not tell). It is gone from now.
				gone[k] = goneSource{at: e.At, last: g.last}
			} else if prior.protected() && (k.resource == "secrets" || k.resource == "configmaps") {
				gone[k] = goneSource{at: e.At, last: prior}
			}
			if prior != nil {
				deleted[k] = prior
			}
			delete(state, k)
		case "deletecollection":
			for sk, o := range state {
				if sk.resource == k.resource && sk.namespace == ns {
					deleted[sk] = o
					delete(state, sk)
				}
			}
			delete(unknownCreates, key{k.resource, ns, ""})
		default:
			if result == nil {
				break
			}
			record(result)
			if !earlier {
				delete(deleted, k)
				if g, ok := gone[k]; ok {
					if gap := s.serving(g.at, e.At); s.ProtectedGap > 0 && gap > s.ProtectedGap {
						bad(fmt.Sprintf("protected source %s/%s was gone for %s while the API server served (%s in all), longer than %s",
							ns, k.name, gap.Round(time.Millisecond), e.At.Sub(g.at).Round(time.Millisecond), s.ProtectedGap), e)
					}
					delete(gone, k)
				}
			}
		}
	}
	for k, g := range gone {
		if s.ProtectedGap > 0 && s.serving(g.at, end) > s.ProtectedGap {
			out = append(out, Violation{Rule: fmt.Sprintf("protected source %s/%s deleted at %s was never restored", k.namespace, k.name, g.at.Format("15:04:05.000")), Request: "none", At: g.at})
		}
	}
	return out, unjudged
}

// judge returns the rule courier's write e breaks, or "".
func judge(e Event, k key, prior, result *object, s Scope, gone map[key]goneSource, nsLabels map[string]map[string]string) string {
	switch k.resource {
	case "leases":
		if k.namespace == s.Installation {
			return ""
		}
		return "wrote a Lease outside its namespace"
	case "events":
		for _, v := range s.Values {
			if bytes.Contains(e.Request, []byte(v)) {
				return "a Secret value in an Event"
			}
		}
		return ""
	case "secrets", "configmaps":
		switch e.Verb {
		case "create":
			if result.owned(s.Installation) || result.protected() {
				return ""
			}
			return "created an object that carries none of courier's marks"
		case "update", "patch":
			switch {
			case prior == nil:
				return "wrote an object it had not seen created"
			case prior.owned(s.Installation):
				return ""
			case prior.pulls() && len(changedBeyond(prior, result, true)) == 0:
				return ""
			}
			return "modified an object it did not create"
		case "delete":
			if !prior.owned(s.Installation) {
				return "deleted an object it did not create"
			}
			if src := prior.Metadata.Annotations["courier.dev/source"]; src != "" {
				ns, name, _ := strings.Cut(src, "/")
				sk := key{k.resource, ns, name}
				// Gone, its replicas stay where its last selector wants
				// them; one in a namespace relabelled out of it goes, as
				// it would with the source there.
				if g, ok := gone[sk]; ok && targets(g.last, nsLabels[k.namespace]) {
					return "deleted a replica of a protected source while that source was gone"
				}
			}
			return ""
		}
	case "jobs":
		if prior.optedInJob() || result.optedInJob() {
			return ""
		}
		return "recreated a Job that did not opt in itself"
	default:
		if workloads[k.resource] && (e.Verb == "patch" || e.Verb == "update") {
			d := changedBeyond(prior, result, false)
			if len(d) == 0 {
				return ""
			}
			return "changed a workload beyond courier's annotations (" + strings.Join(d, ", ") + ")"
		}
	}
	return "wrote a " + k.resource + " it has no business writing"
}

// Writes are the writes by user after since, in namespaces (all when nil),
// but Lease renewals: once a scenario is settled courier makes none.
func Writes(events []Event, user string, since time.Time, namespaces map[string]bool) []Event {
	var out []Event
	for _, e := range events {
		if e.Write() && e.Username() == user && e.At.After(since) && e.Ref.Resource != "leases" &&
			(namespaces == nil || namespaces[e.Ref.Namespace]) {
			out = append(out, e)
		}
	}
	return out
}

// Rollouts counts, per workload ("resource namespace/name"), user's writes
// that changed a courier.dev/config-hash in it (the pod template's, or a
// custom kind's): each is a rollout. A workload's first hash counts too.
func Rollouts(events []Event, user string, namespaces map[string]bool) map[string]int {
	hashes := map[key]string{}
	out := map[string]int{}
	for _, e := range inCommitOrder(events) {
		if !e.Write() || e.Ref.Subresource != "" || !namespaces[e.Ref.Namespace] || (!workloads[e.Ref.Resource] && e.Ref.Resource != "jobs") {
			continue
		}
		k := key{e.Ref.Resource, e.Ref.Namespace, e.Ref.Name}
		o := parse(e.Response)
		if o == nil {
			delete(hashes, k)
			continue
		}
		if k.name == "" {
			k.name = o.Metadata.Name
		}
		h := configHash(o.raw["spec"])
		if e.Username() == user && h != hashes[k] {
			out[k.resource+" "+k.namespace+"/"+k.name]++
		}
		hashes[k] = h
	}
	return out
}

// configHash is every courier.dev/config-hash under v, joined.
func configHash(v any) string {
	switch t := v.(type) {
	case map[string]any:
		var hs []string
		for k, x := range t {
			if k == "courier.dev/config-hash" {
				if s, ok := x.(string); ok {
					hs = append(hs, s)
				}
				continue
			}
			if h := configHash(x); h != "" {
				hs = append(hs, h)
			}
		}
		slices.Sort(hs)
		return strings.Join(hs, ",")
	case []any:
		var hs []string
		for _, x := range t {
			if h := configHash(x); h != "" {
				hs = append(hs, h)
			}
		}
		return strings.Join(hs, ",")
	}
	return ""
}
