package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SPEC (Reload, inputs the pod spec does not name): a workload that reads a
// Secret through the API or a sidecar names it in courier.dev/reload-on (or,
// under --compat=reloader, in Reloader's reload list), and a change of that
// whole object rolls it out, once; `courier status` lists it as a consumer,
// named by the annotation.
func TestReloadOnNamesAnInputThePodSpecDoesNotReference(t *testing.T) {
	s := setupReplication(t, "--compat=reloader")
	ns := s.target(t, "named", nil)
	createSecret(t, s.src, "token", withAnnotation(keyReplicateTo, "test="+s.id), withData("t", "1"))
	eventually(t, converge, "replica of token", secretIn(ns, "token", map[string][]byte{"t": []byte("1")}))
	createSecret(t, ns, "db", withData("password", "v1"))
	spec := podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil) // token is not in it
	createDeployment(t, ns, "api", map[string]string{"courier.dev/reload-on": "secret/token"}, spec)
	createDeployment(t, ns, "legacy", map[string]string{"secret.reloader.stakater.com/reload": "token"}, spec)
	createDeployment(t, ns, "bystander", map[string]string{keyReload: "true"}, spec)
	for _, name := range []string{"api", "legacy", "bystander"} {
		settled(t, ns, name)
	}

	updateSecret(t, s.src, "token", func(x *corev1.Secret) { x.Data["t"] = []byte("2") })
	for _, name := range []string{"api", "legacy"} {
		rolledOutOnce(t, ns, name, 1, "secret/token")
	}
	noRollout(t, ns, "bystander", 1) // it consumes db only, and names nothing
	// db is referenced, but neither names it nor opts in for it.
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("v2") })
	rolledOutOnce(t, ns, "bystander", 1, "secret/db")
	for _, name := range []string{"api", "legacy"} {
		noRollout(t, ns, name, 2)
	}

	r := statusReport(t, "--namespace="+s.courier.namespace)
	src := sourceIn(r, s.src+"/token")
	if src == nil {
		t.Fatalf("status lacks %s/token", s.src)
	}
	named := map[string]string{}
	for _, c := range src.Consumers {
		named[c.Name] = c.NamedBy
	}
	if named["api"] != "courier.dev/reload-on" || named["legacy"] != "secret.reloader.stakater.com/reload" {
		t.Errorf("consumers of token: %+v; want api named by courier.dev/reload-on, legacy by Reloader's list", src.Consumers)
	}
	d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), "api", metav1.GetOptions{})
	if err != nil || d.Annotations["courier.dev/reloaded-for"] != "secret/token" {
		t.Errorf("api: reloaded-for %q (%v)", d.Annotations["courier.dev/reloaded-for"], err)
	}
}
