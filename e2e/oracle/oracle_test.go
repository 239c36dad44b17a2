package oracle

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

const courier = "system:serviceaccount:courier-system:courier"

var t0 = time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)

// line is one audit log line: user writes object (JSON, or "" for none) to
// resource ns/name with verb, at second at.
func line(at int, user, verb, resource, ns, name, object string) string {
	resp := `{"kind":"Status","status":"Success"}`
	if object != "" {
		// Each write gives the object a newer version, as etcd's revision.
		resp = strings.Replace(object, `"resourceVersion":"1"`, fmt.Sprintf(`"resourceVersion":"%d"`, 100+at), 1)
	}
	imp := ""
	if user != "admin" {
		imp = fmt.Sprintf(`"impersonatedUser":{"username":%q},`, user)
	}
	return fmt.Sprintf(`{"auditID":"a%d","stage":"ResponseComplete","verb":%q,"requestURI":"/api/v1/namespaces/%s/%s/%s","user":{"username":"admin"},%s"objectRef":{"resource":%q,"namespace":%q,"name":%q},"responseStatus":{"code":200},"requestObject":%s,"responseObject":%s,"stageTimestamp":%q}`,
		at, verb, ns, resource, name, imp, resource, ns, name, resp, resp, t0.Add(time.Duration(at)*time.Second).Format(time.RFC3339Nano))
}

// received is the RequestReceived line of a write by user at second at, its
// audit ID paired with line(at, ...)'s; name is "" for a create.
func received(at int, user, verb, resource, ns, name string) string {
	return fmt.Sprintf(`{"auditID":"a%d","stage":"RequestReceived","verb":%q,"requestURI":"/api/v1/namespaces/%s/%s","user":{"username":"admin"},"impersonatedUser":{"username":%q},"objectRef":{"resource":%q,"namespace":%q,"name":%q},"stageTimestamp":%q}`,
		at, verb, ns, resource, user, resource, ns, name, t0.Add(time.Duration(at)*time.Second).Format(time.RFC3339Nano))
}

// failed is an audit line answered with code.
func failed(line string, code int) string {
	return strings.Replace(line, `"responseStatus":{"code":200}`, fmt.Sprintf(`"responseStatus":{"code":%d}`, code), 1)
}

func secret(ns, name, labels, annotations, data string) string {
	return fmt.Sprintf(`{"kind":"Secret","metadata":{"name":%q,"namespace":%q,"resourceVersion":"1","labels":{%s},"annotations":{%s}},"data":{%s}}`, name, ns, labels, annotations, data)
}

const (
	replicaMarks = `"app.kubernetes.io/managed-by":"courier","courier.dev/replica":"true"`
	fromA        = `"courier.dev/source":"a/s","courier.dev/installation":"courier-system"`
)

func TestCheck(t *testing.T) {
	deploy := func(hash, image string) string {
		return fmt.Sprintf(`{"kind":"Deployment","metadata":{"name":"d","namespace":"b"},"spec":{"template":{"metadata":{"annotations":{"courier.dev/config-hash":%q}},"spec":{"containers":[{"image":%q}]}}}}`, hash, image)
	}
	// deployAt is d at resourceVersion rv, with the Deployment
	// controller's revision annotation and courier's hash ("" for none).
	deployAt := func(rv int, revision, hash string) string {
		annotations := ""
		if revision != "" {
			annotations = fmt.Sprintf(`,"annotations":{"deployment.kubernetes.io/revision":%q}`, revision)
		}
		return fmt.Sprintf(`{"kind":"Deployment","metadata":{"name":"d","namespace":"b","resourceVersion":"%d"%s},"spec":{"template":{"metadata":{"annotations":{"courier.dev/config-hash":%q}}}}}`, rv, annotations, hash)
	}
	status := func(line string) string {
		return strings.Replace(line, `"objectRef":{"resource":"deployments"`, `"objectRef":{"subresource":"status","resource":"deployments"`, 1)
	}
	cases := []struct {
		name  string
		lines []string
		want  []string // rules broken, in order
	}{
		{"a replica created, updated and deleted", []string{
			line(1, courier, "create", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, `"k":"djE="`)),
			line(2, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, `"k":"djI="`)),
			line(3, courier, "delete", "secrets", "b", "s", ""),
		}, nil},
		{"an unmarked object created", []string{
			line(1, courier, "create", "secrets", "b", "s", secret("b", "s", "", "", "")),
		}, []string{"created an object that carries none of courier's marks"}},
		{"a stranger's object overwritten", []string{
			line(1, "admin", "create", "secrets", "b", "s", secret("b", "s", "", "", `"k":"bWluZQ=="`)),
			line(2, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, `"k":"djE="`)),
		}, []string{"modified an object it did not create"}},
		{"another installation's replica deleted", []string{
			line(1, "admin", "create", "secrets", "b", "s", secret("b", "s", replicaMarks, `"courier.dev/installation":"other"`, "")),
			line(2, courier, "delete", "secrets", "b", "s", ""),
		}, []string{"deleted an object it did not create"}},
		{"an object never seen written", []string{
			line(1, courier, "patch", "configmaps", "b", "c", secret("b", "c", replicaMarks, fromA, "")),
		}, []string{"wrote an object it had not seen created"}},
		{"a pull target's content written, and then its labels", []string{
			line(1, "admin", "create", "secrets", "b", "p", secret("b", "p", `"team":"x"`, `"replicator.v1.mittwald.de/replicate-from":"a/s"`, "")),
			line(2, courier, "patch", "secrets", "b", "p", secret("b", "p", `"team":"x"`, `"replicator.v1.mittwald.de/replicate-from":"a/s","courier.dev/pulled-from":"a/s"`, `"k":"djE="`)),
			line(3, courier, "patch", "secrets", "b", "p", secret("b", "p", `"team":"y"`, `"replicator.v1.mittwald.de/replicate-from":"a/s","courier.dev/pulled-from":"a/s"`, `"k":"djE="`)),
		}, []string{"modified an object it did not create"}},
		{"a protected source restored in time, its replica kept", []string{
			line(1, "admin", "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
			line(2, courier, "create", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, `"k":"djE="`)),
			line(3, "admin", "delete", "secrets", "a", "s", ""),
			line(4, courier, "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
		}, nil},
		{"a protected source's replica deleted while the source was gone, and the source restored late", []string{
			line(1, "admin", "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
			line(2, courier, "create", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, `"k":"djE="`)),
			line(3, "admin", "delete", "secrets", "a", "s", ""),
			line(4, courier, "delete", "secrets", "b", "s", ""),
			line(30, courier, "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
		}, []string{"deleted a replica of a protected source while that source was gone", "protected source a/s was gone for 27s while the API server served (27s in all), longer than 10s"}},
		{"a protected source's replica deleted while the source was gone, from a namespace relabelled out of its selector", []string{
			line(1, "admin", "create", "namespaces", "", "b", `{"kind":"Namespace","metadata":{"name":"b","labels":{"env":"prod"}}}`),
			line(1, "admin", "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, `"courier.dev/replicate-to":"env=prod"`, `"k":"djE="`)),
			line(2, courier, "create", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, `"k":"djE="`)),
			line(3, "admin", "delete", "secrets", "a", "s", ""),
			line(4, "admin", "update", "namespaces", "b", "b", `{"kind":"Namespace","metadata":{"name":"b","labels":{"env":"dev"}}}`),
			line(5, courier, "delete", "secrets", "b", "s", ""),
			line(6, courier, "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, `"courier.dev/replicate-to":"env=prod"`, `"k":"djE="`)),
		}, nil},
		{"a protected source never restored", []string{
			line(1, "admin", "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", "")),
			line(3, "admin", "delete", "secrets", "a", "s", ""),
		}, []string{"protected source a/s deleted at 05:00:03.000 was never restored"}},
		// An update succeeds only on an object that is there: one placed
		// after its deletion came before it.
		{"a namespace's objects deleted together, placed before a replica's update", []string{
			line(1, courier, "create", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
			line(2, "admin", "deletecollection", "secrets", "b", "", ""),
			line(3, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
		}, nil},
		{"an update placed after the deletion of an object courier did not create", []string{
			line(1, "admin", "create", "secrets", "b", "s", secret("b", "s", "", "", `"mine":"a2VlcA=="`)),
			line(2, "admin", "deletecollection", "secrets", "b", "", ""),
			line(3, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
		}, []string{"modified an object it did not create"}},
		{"an update of an object never seen created", []string{
			line(3, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
		}, []string{"wrote an object it had not seen created"}},
		{"a workload rolled out, then its image changed", []string{
			line(1, "admin", "create", "deployments", "b", "d", deploy("", "app:1")),
			line(2, courier, "patch", "deployments", "b", "d", deploy("h1", "app:1")),
			line(3, courier, "patch", "deployments", "b", "d", deploy("h2", "app:2")),
		}, []string{"changed a workload beyond courier's annotations (.spec.template.spec.containers)"}},
		{"a controller's write through the status, then a rollout, then courier's own status write", []string{
			line(1, "admin", "create", "deployments", "b", "d", deploy("", "app:1")),
			strings.Replace(line(2, "admin", "update", "deployments", "b", "d",
				strings.Replace(deploy("", "app:1"), `"namespace":"b"}`, `"namespace":"b","annotations":{"deployment.kubernetes.io/revision":"1"}}`, 1)),
				`"objectRef":{"resource":"deployments"`, `"objectRef":{"subresource":"status","resource":"deployments"`, 1),
			line(3, courier, "patch", "deployments", "b", "d",
				strings.Replace(deploy("h1", "app:1"), `"namespace":"b"}`, `"namespace":"b","annotations":{"deployment.kubernetes.io/revision":"1"}}`, 1)),
			strings.Replace(line(4, courier, "update", "deployments", "b", "d", deploy("h1", "app:1")),
				`"objectRef":{"resource":"deployments"`, `"objectRef":{"subresource":"status","resource":"deployments"`, 1),
		}, []string{"wrote the status of a deployments"}},
		// The audit log holds events in the order their requests
		// completed: courier's patch (version 11) may come after the
		// controller's status write (version 12) that followed it.
		{"a rollout whose event comes after a later status write", []string{
			line(1, "admin", "create", "deployments", "b", "d", deployAt(10, "1", "")),
			status(line(2, "admin", "update", "deployments", "b", "d", deployAt(12, "2", ""))),
			line(3, courier, "patch", "deployments", "b", "d", deployAt(11, "1", "h1")),
			line(4, courier, "patch", "deployments", "b", "d", deployAt(13, "2", "h2")),
		}, nil},
		{"a patch logged before the create it followed (another kube-apiserver)", []string{
			line(2, courier, "patch", "deployments", "b", "d", deployAt(12, "1", "h1")),
			line(1, "admin", "create", "deployments", "b", "d", deployAt(10, "1", "")),
		}, nil},
		// A deletion returns no version of its own commit: the namespace
		// controller's deletecollection, logged before courier's patch
		// that preceded it (the patch succeeded, so the Deployment was
		// there), is placed before it.
		{"a patch logged after the deletecollection that followed it", []string{
			line(1, "admin", "create", "deployments", "b", "d", deployAt(10, "1", "")),
			line(2, "admin", "deletecollection", "deployments", "b", "", ""),
			line(3, courier, "patch", "deployments", "b", "d", deployAt(12, "1", "h1")),
		}, nil},
		{"a patch logged after the delete that followed it", []string{
			line(1, "admin", "create", "deployments", "b", "d", deployAt(10, "1", "")),
			line(2, "admin", "delete", "deployments", "b", "d", deployAt(10, "1", "")),
			line(3, courier, "patch", "deployments", "b", "d", deployAt(12, "1", "h1")),
			line(4, courier, "patch", "deployments", "b", "d", deployAt(13, "1", "h2")),
		}, nil},
		{"a patch of a deleted object changing more than courier's annotations", []string{
			line(1, "admin", "create", "deployments", "b", "d", deployAt(10, "1", "")),
			line(2, "admin", "deletecollection", "deployments", "b", "", ""),
			line(3, courier, "patch", "deployments", "b", "d", deployAt(12, "2", "h1")),
		}, []string{"changed a workload beyond courier's annotations (.metadata.annotations.deployment.kubernetes.io/revision)"}},
		{"a replica written after it was deleted is judged as the object it was", []string{
			line(1, courier, "create", "secrets", "b", "s", secret("b", "s", "", replicaMarks+","+fromA, `"k":"MQ=="`)),
			line(2, "admin", "delete", "secrets", "b", "s", secret("b", "s", "", replicaMarks+","+fromA, `"k":"MQ=="`)),
			line(3, courier, "update", "secrets", "b", "s", secret("b", "s", "", replicaMarks+","+fromA, `"k":"Mg=="`)),
		}, nil},
		{"a rollout that really changes the revision", []string{
			line(1, "admin", "create", "deployments", "b", "d", deployAt(10, "1", "")),
			status(line(2, "admin", "update", "deployments", "b", "d", deployAt(12, "2", ""))),
			line(3, courier, "patch", "deployments", "b", "d", deployAt(13, "1", "h1")),
		}, []string{"changed a workload beyond courier's annotations (.metadata.annotations.deployment.kubernetes.io/revision)"}},
		{"a secret value in an Event", []string{
			line(1, courier, "create", "events", "b", "e1", `{"kind":"Event","message":"replica written"}`),
			line(2, courier, "create", "events", "b", "e2", `{"kind":"Event","message":"value hunter2 leaked"}`),
		}, []string{"a Secret value in an Event"}},
		{"a Job recreated only when it opted in itself", []string{
			line(1, "admin", "create", "jobs", "b", "j", `{"kind":"Job","metadata":{"name":"j","annotations":{"courier.dev/reload":"true"}}}`),
			line(2, courier, "delete", "jobs", "b", "j", ""),
			line(3, "admin", "create", "jobs", "b", "k", `{"kind":"Job","metadata":{"name":"k"}}`),
			line(4, courier, "delete", "jobs", "b", "k", ""),
		}, []string{"recreated a Job that did not opt in itself"}},
		{"a completed request's RequestReceived changes nothing: an update of an object never seen written", []string{
			received(1, courier, "update", "secrets", "b", "s"),
			line(1, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
		}, []string{"wrote an object it had not seen created"}},
		{"a create that never completed (kube-apiserver killed) or failed with 503: what follows on the object is not judged", []string{
			received(1, courier, "create", "secrets", "b", ""),
			line(2, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
			failed(line(3, courier, "create", "configmaps", "b", "c", secret("b", "c", replicaMarks, fromA, "")), 503),
			line(4, courier, "patch", "configmaps", "b", "c", secret("b", "c", replicaMarks, fromA, "")),
			line(5, courier, "patch", "configmaps", "b", "c", secret("b", "c", replicaMarks, fromA, "")),
		}, nil},
		// An unfinished create's name is not in the log, so any object
		// there the log never saw may be its: a write to one is not judged.
		// A successful create is: it shows no object of its name was there.
		{"after an unfinished create, a create there is still judged", []string{
			received(1, "admin", "create", "secrets", "b", ""),
			line(2, courier, "create", "secrets", "b", "s", secret("b", "s", "", "", "")),
			line(3, courier, "update", "secrets", "b", "t", secret("b", "t", replicaMarks, fromA, "")),
		}, []string{"created an object that carries none of courier's marks"}},
		{"a failed create (409) is no uncertainty", []string{
			failed(line(1, courier, "create", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")), 409),
			line(2, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
		}, []string{"wrote an object it had not seen created"}},
		{"a controller's write answered 500 but applied, then a rollout over it", []string{
			line(1, "admin", "create", "deployments", "b", "d", deploy("", "app:1")),
			failed(line(2, "admin", "update", "deployments", "b", "d",
				strings.Replace(deploy("", "app:1"), `"namespace":"b"}`, `"namespace":"b","annotations":{"deployment.kubernetes.io/revision":"1"}}`, 1)), 500),
			line(3, courier, "patch", "deployments", "b", "d",
				strings.Replace(deploy("h1", "app:1"), `"namespace":"b"}`, `"namespace":"b","annotations":{"deployment.kubernetes.io/revision":"1"}}`, 1)),
			line(4, courier, "patch", "deployments", "b", "d", deploy("h2", "app:2")),
		}, []string{"changed a workload beyond courier's annotations (.metadata.annotations, .spec.template.spec.containers)"}},
		{"a protected source restored by an uncertain write, deleted again, restored in time", []string{
			line(1, "admin", "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
			line(3, "admin", "delete", "secrets", "a", "s", ""),
			received(5, courier, "create", "secrets", "a", ""),
			line(40, "admin", "delete", "secrets", "a", "s", ""),
			line(45, courier, "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
		}, nil},
		{"writes elsewhere", []string{
			line(1, courier, "create", "leases", "courier-system", "courier", ""),
			line(2, courier, "create", "leases", "b", "courier", ""),
			line(3, courier, "create", "pods", "b", "p", ""),
			line(4, courier, "create", "secrets", "c", "s", secret("c", "s", "", "", "")),
		}, []string{"wrote a Lease outside its namespace", "wrote a pods it has no business writing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			events, err := Read(strings.NewReader(strings.Join(c.lines, "\n")))
			if err != nil {
				t.Fatal(err)
			}
			s := Scope{Courier: courier, Installation: "courier-system", Namespaces: map[string]bool{"a": true, "b": true},
				Values: []string{"hunter2"}, ProtectedGap: 10 * time.Second}
			var got []string
			for _, v := range Check(events, s, t0.Add(time.Minute)) {
				got = append(got, v.Rule)
			}
			if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(c.want, "\n"))
			}
		})
	}
}

func TestWritesLeavesOutLeasesAndEarlierWrites(t *testing.T) {
	events, err := Read(strings.NewReader(strings.Join([]string{
		line(1, courier, "create", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
		line(5, courier, "update", "leases", "courier-system", "courier", ""),
		line(6, "admin", "update", "secrets", "b", "s", ""),
		line(7, courier, "update", "secrets", "b", "s", secret("b", "s", replicaMarks, fromA, "")),
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	w := Writes(events, courier, t0.Add(2*time.Second), nil)
	if len(w) != 1 || w[0].AuditID != "a7" {
		t.Errorf("writes after 2 s: %v, want the update at 7 s", w)
	}
}

func TestRolloutsCountsConfigHashChanges(t *testing.T) {
	deploy := func(hash string, replicas int) string {
		return fmt.Sprintf(`{"kind":"Deployment","metadata":{"name":"d","annotations":{"courier.dev/config-inputs":"x"}},"spec":{"replicas":%d,"template":{"metadata":{"annotations":{"courier.dev/config-hash":%q}}}}}`, replicas, hash)
	}
	events, err := Read(strings.NewReader(strings.Join([]string{
		line(1, "admin", "create", "deployments", "b", "d", deploy("", 1)),
		line(2, courier, "patch", "deployments", "b", "d", deploy("", 1)),   // the baseline: no rollout
		line(3, courier, "patch", "deployments", "b", "d", deploy("h1", 1)), // a rollout
		line(4, "admin", "update", "deployments", "b", "d", deploy("h1", 2)),
		line(5, courier, "patch", "deployments", "b", "d", deploy("h1", 2)),  // a record only
		line(6, courier, "patch", "deployments", "b", "d", deploy("h2", 2)),  // a rollout
		line(7, "admin", "update", "deployments", "b", "d", deploy("h3", 2)), // not courier's
		line(8, courier, "patch", "deployments", "c", "d", deploy("h1", 2)),  // elsewhere
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	got := Rollouts(events, courier, map[string]bool{"b": true})
	if len(got) != 1 || got["deployments b/d"] != 2 {
		t.Errorf("rollouts %v, want deployments b/d: 2", got)
	}
}

// TestProtectedGapCountsOnlyServingTime: the bound on a protected source's
// absence counts the time the API server served, not the test's outages of
// it; a scope with no bound checks nothing.
func TestProtectedGapCountsOnlyServingTime(t *testing.T) {
	events, err := Read(strings.NewReader(strings.Join([]string{
		line(1, "admin", "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
		line(3, "admin", "delete", "secrets", "a", "s", ""),
		line(30, courier, "create", "secrets", "a", "s", secret("a", "s", `"courier.dev/protect":"true"`, "", `"k":"djE="`)),
	}, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	for _, c := range []struct {
		name    string
		gap     time.Duration
		outages []Span
		want    int
	}{
		{"27 s gone, all of it serving", 10 * time.Second, nil, 1},
		{"27 s gone, 20 of them in an outage", 10 * time.Second, []Span{{at(5), at(25)}}, 0},
		{"an outage partly before the deletion", 10 * time.Second, []Span{{at(0), at(10)}}, 1},
		{"no bound", 0, nil, 0},
	} {
		s := Scope{Courier: courier, Installation: "courier-system", Namespaces: map[string]bool{"a": true}, ProtectedGap: c.gap, Outages: c.outages}
		if got := Check(events, s, at(60)); len(got) != c.want {
			t.Errorf("%s: %v, want %d violations", c.name, got, c.want)
		}
	}
}
