package e2e

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/courier-k8s/courier/internal/migrate"
)

// courierMigrate runs `courier migrate` with the admin kubeconfig, as a
// user would, and returns its report.
func courierMigrate(t *testing.T, args ...string) migrate.Report {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), env.courier, append([]string{"migrate", "--kubeconfig=" + env.cluster.Kubeconfig, "-o", "json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("courier migrate %v: %v\n%s", args, err, stderr.String())
	}
	var r migrate.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("courier migrate -o json: %v\n%s", err, out)
	}
	return r
}

// SPEC (courier migrate): objects annotated for Reloader,
// kubernetes-replicator and Reflector get the courier annotations that mean
// the same; with --apply they are added (the old ones kept), and a courier
// running without --compat then does what the old tools did.
func TestMigrateApplyMakesCompatUnnecessary(t *testing.T) {
	s := setupReplication(t) // no --compat
	a := namedNamespace(t, "mig-a-"+s.id, map[string]string{"test": s.id, "team": s.id})
	b := namedNamespace(t, "mig-b-"+s.id, map[string]string{"test": s.id})
	createSecret(t, s.src, "push", withAnnotation("replicator.v1.mittwald.de/replicate-to", a+","+b), withData("k", "1"))
	createSecret(t, s.src, "labelled", withAnnotation("replicator.v1.mittwald.de/replicate-to-matching", "team="+s.id), withData("k", "1"))
	createSecret(t, s.src, "auto-mirror",
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-allowed", "true"),
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces", b),
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-auto-enabled", "true"), withData("k", "1"))
	createSecret(t, a, "pulling", withAnnotation("replicator.v1.mittwald.de/replicate-from", s.src+"/push"))
	createSecret(t, a, "app-secret", withData("password", "1"))
	createSecret(t, a, "tagged", withAnnotation("reloader.stakater.com/match", "true"), withData("k", "1"))
	createDeployment(t, a, "my-app", map[string]string{"reloader.stakater.com/auto": "true"}, podSpec(nil, []corev1.EnvFromSource{envFromSecret("app-secret")}, nil))
	createDeployment(t, a, "named", map[string]string{"secret.reloader.stakater.com/reload": "app-secret"},
		podSpec([]corev1.EnvVar{keyRef("secret", "app-secret", "password")}, nil, nil))
	createDeployment(t, a, "searching", map[string]string{"reloader.stakater.com/search": "true"},
		podSpec(nil, []corev1.EnvFromSource{envFromSecret("tagged"), envFromSecret("app-secret")}, nil))

	consistently(t, quiet, "without --compat nothing is replicated", secretGone(a, "push"))

	want := map[string]map[string]string{
		s.src + "/push":        {keyReplicateTo: "kubernetes.io/metadata.name in (" + a + "," + b + ")"},
		s.src + "/labelled":    {keyReplicateTo: "team=" + s.id},
		s.src + "/auto-mirror": {keyReplicateTo: "kubernetes.io/metadata.name in (" + b + ")"},
		a + "/my-app":          {keyReload: "true"},
		a + "/named":           {keyReloadOn: "secret/app-secret"},
		a + "/searching":       {keyReloadOn: "secret/tagged"},
	}
	check := func(r migrate.Report, applied bool) {
		t.Helper()
		got := map[string]map[string]string{}
		var pullNote string
		for _, o := range r.Objects {
			if o.Namespace != s.src && o.Namespace != a && o.Namespace != b {
				continue
			}
			if len(o.Add) > 0 {
				got[o.Namespace+"/"+o.Name] = o.Add
				if o.Applied != applied {
					t.Errorf("%s %s/%s applied=%v, want %v", o.Kind, o.Namespace, o.Name, o.Applied, applied)
				}
			}
			for _, n := range o.NotHonoured {
				if o.Name == "pulling" && n.Annotation == "replicator.v1.mittwald.de/replicate-from" {
					pullNote = n.Why
				}
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("courier annotations (-want +got):\n%s", diff)
		}
		if !strings.Contains(pullNote, "--compat") {
			t.Errorf("no line saying the pull needs --compat: %q", pullNote)
		}
	}
	check(courierMigrate(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src), false)
	// --apply only within the test's namespaces: the other tests' objects
	// running beside it are theirs to keep as they are.
	check(courierMigrate(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--watch-namespaces="+strings.Join([]string{s.src, a, b}, ","), "--apply"), true)

	// The old annotations stay; courier, without --compat, now replicates...
	got, err := getSecret(t.Context(), s.src, "push")
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations["replicator.v1.mittwald.de/replicate-to"] != a+","+b || got.Annotations[keyReplicateTo] == "" {
		t.Errorf("after --apply the source carries %v", got.Annotations)
	}
	data := map[string][]byte{"k": []byte("1")}
	for _, r := range []struct{ ns, name string }{{a, "push"}, {b, "push"}, {a, "labelled"}, {b, "auto-mirror"}} {
		eventually(t, converge, r.name+" in "+r.ns, secretIn(r.ns, r.name, data))
	}
	// ...and reloads as Reloader did.
	myApp, named, searching := settled(t, a, "my-app"), settled(t, a, "named"), settled(t, a, "searching")
	updateSecret(t, a, "app-secret", func(x *corev1.Secret) { x.Data["password"] = []byte("2") })
	rolledOutOnce(t, a, "my-app", myApp, "secret/app-secret")
	rolledOutOnce(t, a, "named", named, "secret/app-secret")
	noRollout(t, a, "searching", searching)
	updateSecret(t, a, "tagged", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	rolledOutOnce(t, a, "searching", searching, "secret/tagged")
}
