package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// permission is one (API group, resource, verb) that a rule of manifests/
// grants, with the rule's resourceNames.
type permission struct {
	group, resource, verb string
	names                 []string
	leader                bool // from the leader Role, not the ClusterRole
}

func (p permission) String() string {
	s := p.resource + ":" + p.verb
	if p.group != "" {
		s = p.group + "/" + s
	}
	if len(p.names) > 0 {
		s += "[" + strings.Join(p.names, ",") + "]"
	}
	return s
}

func (p permission) rule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{p.group}, Resources: []string{p.resource}, Verbs: []string{p.verb}, ResourceNames: p.names}
}

// permissions splits rules into one permission per group, resource and verb.
func permissions(rules []rbacv1.PolicyRule, leader bool) []permission {
	var out []permission
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, permission{group: g, resource: res, verb: v, names: r.ResourceNames, leader: leader})
				}
			}
		}
	}
	return out
}

// without is the RBAC of manifests/ minus drop.
func without(all []permission, drop permission) manifestRBAC {
	var cluster, leader []permission
	for _, p := range all {
		if p.leader {
			leader = append(leader, p)
		} else {
			cluster = append(cluster, p)
		}
	}
	return manifestRBAC{cluster: rulesWithout(cluster, drop), leader: rulesWithout(leader, drop)}
}

// rulesWithout is all as rules, but drop.
func rulesWithout(all []permission, drop permission) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{}
	for _, p := range all {
		if p.String() != drop.String() || p.leader != drop.leader {
			rules = append(rules, p.rule())
		}
	}
	return rules
}

// compatSmoke is set in the process of make test that runs a part of the
// suite on the oldest supported minor (e2e/suite's -compat).
const compatSmoke = "COURIER_E2E_COMPAT_SMOKE"

// TestRBACIsMinimal runs the same probe of everything courier does as the
// ServiceAccount with the RBAC of manifests/ (every check passes), then once
// for each permission those rules grant, with only that permission removed:
// each time courier's log must show the API server refusing it exactly that
// permission, so no permission is unused. A failed check alone proves
// nothing (it may be a timeout on a loaded machine), and a check may pass
// without a permission by luck of timing (without watch, informers fall back
// to relisting with a growing backoff): the refusal is the evidence.
//
// list is special: client-go's informers fill their caches through a
// streaming watch (WatchListClient) where the API server supports it, and
// list only where it does not. Those probes turn streaming lists off, as an
// older API server would.
func TestRBACIsMinimal(t *testing.T) {
	// With the guard policy, as installed: courier's writes to replicas need
	// the verb override.
	installGuardPolicy(t)
	all := append(permissions(env.rbac.cluster, false), permissions(env.rbac.leader, true)...)
	// Each probe runs in a subtest of its own, one at a time: its courier
	// must be gone before the next starts, as the reloader of any courier
	// acts on every namespace's workloads.
	t.Run("manifests", func(t *testing.T) {
		failed, log := probeCourier(t, courierIdentity(), "")
		if failed != "" {
			t.Fatalf("with the RBAC of manifests/, check %q failed; courier's log:\n%s", failed, log)
		}
		// Else a refusal found below could be one courier meets anyway.
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "is forbidden") {
				t.Fatalf("with the RBAC of manifests/, the API server refused courier something:\n%s", line)
			}
		}
	})
	if t.Failed() {
		return
	}
	if os.Getenv(compatSmoke) != "" {
		// make test's part on the oldest minor proves the manifests' rules
		// suffice there (above); that each is needed is a property of
		// courier's code, proven here by the main suite's run and on the
		// oldest minor by make test-compat.
		t.Logf("%s: the rules of manifests/ suffice on this minor; each removed in turn: in the main suite and make test-compat", compatSmoke)
		return
	}

	broke := map[string]string{}
	t.Run("without", func(t *testing.T) {
		for i, p := range all {
			t.Run(p.String(), func(t *testing.T) {
				id := identity{sa: fmt.Sprintf("courier-minus-%d", i), rules: without(all, p)}
				if err := id.grantCluster(t.Context()); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { id.revokeCluster(context.Background()) })
				var env []string
				if p.verb == "list" {
					env = []string{"KUBE_FEATURE_WatchListClient=false"}
				}
				failed, log := probeCourier(t, id, refusal(p), env...)
				// What breaks must be this permission's refusal, not a
				// check that merely timed out on a busy machine.
				if !strings.Contains(log, refusal(p)) {
					t.Errorf("without %s courier's log never shows the API server refusing it (%s); the first failed check was %q: the permission is unused, or courier hides the refusal",
						p, refusal(p), failed)
					return
				}
				what := []string{"log: " + refusal(p)}
				if failed != "" {
					what = append(what, "check failed: "+failed)
				}
				t.Logf("without %s: %s", p, strings.Join(what, "; "))
				broke[p.String()] = strings.Join(what, "; ")
			})
		}
	})
	for _, p := range all {
		t.Logf("%-40s → %s", p, broke[p.String()])
	}
}

// logShowing is c's log once it shows want, or after 30 s ("": at once):
// under the suite's load a courier may make the request the API server
// refuses after the first check that needed it has given up.
func logShowing(ctx context.Context, c *courierProcess, want string) string {
	_ = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return want == "" || strings.Contains(c.Logs(), want), nil
	})
	return c.Logs()
}

// refusal is what courier logs (JSON, so quotes come escaped) when the API
// server refuses it p: RBAC's own message, or for the verb override the
// guard policy's, which names it.
func refusal(p permission) string {
	if p.verb == "override" {
		return fmt.Sprintf(`you need the RBAC verb \"override\" on %s`, p.resource)
	}
	return fmt.Sprintf(`cannot %s resource \"%s\" in API group \"%s\"`, p.verb, p.resource, p.group)
}

// probeCourier starts courier as id in fresh namespaces and runs, in order,
// a check of each thing courier does. It returns the first check that
// failed ("" if none) and courier's log, once it shows refused (logShowing).
func probeCourier(t *testing.T, id identity, refused string, env ...string) (failed, log string) {
	t.Helper()
	ctx := t.Context()
	tid := testID()
	src := newNamespace(t, "rbac-src", nil)
	dst := newNamespace(t, "rbac-dst", map[string]string{"test": tid})
	c := startCourierAs(t, id, env, "--source-namespaces="+src, "--reload-debounce=100ms", "--compat=replicator",
		"--lease-duration=6s", "--renew-deadline=2s", "--retry-period=500ms")

	const within = 4 * time.Second
	var detail string // what the last check saw, when it says
	check := func(what string, cond func(context.Context) (bool, error)) bool {
		if failed != "" {
			return false
		}
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, within, true, func(ctx context.Context) (bool, error) {
			ok, err := cond(ctx)
			return ok && err == nil, nil
		})
		if err != nil {
			failed = what
			if detail != "" {
				failed += " (" + detail + ")"
			}
			return false
		}
		detail = ""
		return true
	}
	defer func() { log = logShowing(ctx, c, refused) }()

	if !check("ready (informers synced)", func(ctx context.Context) (bool, error) {
		code, _, err := c.get(ctx, "/readyz")
		return err == nil && code == 200, nil
	}) || !check("leads (Lease acquired)", c.isLeader) {
		return
	}
	leading := time.Now()

	// Replication: create.
	createSecret(t, src, "s", withAnnotation(keyReplicateTo, "test="+tid), withData("k", "1"))
	createConfigMap(t, src, "c", map[string]string{keyReplicateTo: "test=" + tid}, map[string]string{"k": "1"})
	if !check("Secret replicated", secretIn(dst, "s", map[string][]byte{"k": []byte("1")})) ||
		!check("ConfigMap replicated", configMapIn(dst, "c", map[string]string{"k": "1"})) {
		return
	}

	// Pulls (--compat): a Secret and a ConfigMap filled with a patch.
	allow := map[string]string{"replicator.v1.mittwald.de/replication-allowed": "true", "replicator.v1.mittwald.de/replication-allowed-namespaces": dst}
	createSecret(t, src, "ps", withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"),
		withAnnotation("replicator.v1.mittwald.de/replication-allowed-namespaces", dst), withData("k", "p"))
	createConfigMap(t, src, "pc", allow, map[string]string{"k": "p"})
	createSecret(t, dst, "pulls", withAnnotation("replicator.v1.mittwald.de/replicate-from", src+"/ps"))
	createConfigMap(t, dst, "pullc", map[string]string{"replicator.v1.mittwald.de/replicate-from": src + "/pc"}, nil)
	if !check("Secret pull filled", secretIn(dst, "pulls", map[string][]byte{"k": []byte("p")})) ||
		!check("ConfigMap pull filled", configMapIn(dst, "pullc", map[string]string{"k": "p"})) {
		return
	}

	// Reload: every workload kind, from a Secret and from a ConfigMap.
	createSecret(t, src, "w", withData("k", "1"))
	createConfigMap(t, src, "cw", nil, map[string]string{"k": "1"})
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "w", "k"), keyRef("configmap", "cw", "k")}, nil, nil)
	createEveryWorkloadKind(t, src, map[string]string{keyReload: "true"}, spec)
	job := createJob(t, src, "job", map[string]string{keyReload: "true"}, spec, false, nil)
	if !check("every workload kind baselined", everyStamp(src, func(s workloadStamp) bool { return s.inputs != "" })) ||
		!check("Job baselined", jobBaselined(src, "job")) {
		return
	}
	updateSecret(t, src, "w", func(s *corev1.Secret) { s.Data["k"] = []byte("2") })
	var hashes map[string]workloadStamp
	if !check("Secret change rolls out every workload kind", func(ctx context.Context) (bool, error) {
		stamps, err := workloadStamps(ctx, src)
		if err != nil {
			return false, err
		}
		for _, s := range stamps {
			if s.hash == "" {
				return false, nil
			}
		}
		hashes = stamps
		return true, nil
	}) || !check("Secret change recreates the Job", func(ctx context.Context) (bool, error) {
		j, err := getJob(ctx, src, "job")
		return err == nil && j.UID != job && len(j.Spec.Template.Annotations[keyConfigHash]) == 64, nil
	}) {
		return
	}
	updateConfigMap(t, src, "cw", func(cm *corev1.ConfigMap) { cm.Data["k"] = "2" })
	if !check("ConfigMap change rolls out", func(ctx context.Context) (bool, error) {
		now, err := workloadStamps(ctx, src)
		return err == nil && now["Deployment"].hash != hashes["Deployment"].hash, err
	}) {
		return
	}

	// Replication: update.
	updateSecret(t, src, "s", func(s *corev1.Secret) { s.Data["k"] = []byte("2") })
	updateConfigMap(t, src, "c", func(cm *corev1.ConfigMap) { cm.Data["k"] = "2" })
	if !check("Secret replica updated", secretIn(dst, "s", map[string][]byte{"k": []byte("2")})) ||
		!check("ConfigMap replica updated", configMapIn(dst, "c", map[string]string{"k": "2"})) {
		return
	}

	// Guard and Events: a replica edited twice is reverted twice; the
	// second ReplicaReverted Event is counted on the first by a patch.
	for i := range 2 {
		if !check(fmt.Sprintf("replica there to edit (%d)", i+1), editSecret(dst, "s", "k", "edited")) ||
			!check(fmt.Sprintf("edited replica reverted (%d)", i+1), secretIn(dst, "s", map[string][]byte{"k": []byte("2")})) {
			return
		}
	}
	if !check("ReplicaReverted Event recorded twice", func(ctx context.Context) (bool, error) {
		evs, err := admin().CoreV1().Events(dst).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=s,reason=ReplicaReverted"})
		if err != nil {
			return false, err
		}
		var counts []int32
		for _, e := range evs.Items {
			counts = append(counts, e.Count)
		}
		detail = fmt.Sprintf("event counts %v", counts)
		return len(counts) == 1 && counts[0] == 2, nil
	}) {
		return
	}

	// Replication: delete, driven by a namespace label change.
	setNamespaceLabels(t, dst, func(l map[string]string) { delete(l, "test") })
	if !check("Secret replica deleted when its namespace stops matching", secretGone(dst, "s")) ||
		!check("ConfigMap replica deleted when its namespace stops matching", configMapGone(dst, "c")) {
		return
	}

	// Leadership: still held well past the renew deadline.
	time.Sleep(time.Until(leading.Add(4 * time.Second)))
	check("still leads after renewing the Lease", func(ctx context.Context) (bool, error) {
		if c.Exited() {
			return false, nil
		}
		return c.isLeader(ctx)
	})
	return failed, log
}

// editSecret sets key k of ns/name to v as admin, reporting false while the
// Secret does not exist or the write conflicts.
func editSecret(ns, name, k, v string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		s, err := getSecret(ctx, ns, name)
		if err != nil {
			return false, err
		}
		if s.Data == nil { // a pull target courier has not filled yet
			s.Data = map[string][]byte{}
		}
		s.Data[k] = []byte(v)
		recordValues(map[string][]byte{k: []byte(v)})
		_, err = admin().CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{})
		return err == nil, err
	}
}
