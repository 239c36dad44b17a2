package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func envFromSecret(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

func envFromConfigMap(name string) corev1.EnvFromSource {
	return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}
}

// SPEC (--compat=reloader): workloads annotated exactly as Stakater
// Reloader's README shows roll out when it says they would, through
// courier's own rollout (one per change, courier.dev/config-hash).
func TestCompatReloaderAnnotationsRollOutAsReloaderDocuments(t *testing.T) {
	s := setupReplication(t, "--compat=reloader")
	ns := s.target(t, "stakater", nil)
	createSecret(t, ns, "my-secret", withData("password", "1"))
	createConfigMap(t, ns, "my-config", nil, map[string]string{"mode": "1"})
	createSecret(t, ns, "tagged", withAnnotation("reloader.stakater.com/match", "true"), withData("k", "1"))
	createSecret(t, ns, "untagged", withData("k", "1"))
	createConfigMap(t, ns, "ignored", map[string]string{"reloader.stakater.com/ignore": "true"}, map[string]string{"k": "1"})

	// Reloader's README quick start, verbatim but for names and image.
	createDeployment(t, ns, "my-app", map[string]string{"reloader.stakater.com/auto": "true"},
		podSpec(nil, []corev1.EnvFromSource{envFromConfigMap("my-config"), envFromSecret("my-secret")}, nil))
	createDeployment(t, ns, "named", map[string]string{"secret.reloader.stakater.com/reload": "my-secret"},
		podSpec([]corev1.EnvVar{keyRef("secret", "my-secret", "password")}, nil, nil))
	// search on the pod template: Reloader reads it there when the workload
	// itself carries none of its keys.
	createDeploymentWithTemplate(t, ns, "searching", nil, map[string]string{"reloader.stakater.com/search": "true"},
		podSpec(nil, []corev1.EnvFromSource{envFromSecret("tagged"), envFromSecret("untagged")}, nil))
	createDeployment(t, ns, "ignoring", map[string]string{"reloader.stakater.com/auto": "true"},
		podSpec(nil, []corev1.EnvFromSource{envFromConfigMap("ignored"), envFromSecret("untagged")}, nil))
	createDeployment(t, ns, "plain", nil, podSpec(nil, []corev1.EnvFromSource{envFromSecret("my-secret")}, nil))
	createDeployment(t, ns, "bad-list", map[string]string{"secret.reloader.stakater.com/reload": "my-secret, db["},
		podSpec([]corev1.EnvVar{keyRef("secret", "my-secret", "password")}, nil, nil))
	myApp, named, searching, ignoring := settled(t, ns, "my-app"), settled(t, ns, "named"), settled(t, ns, "searching"), settled(t, ns, "ignoring")
	plain := unsettled(t, ns, "plain")
	eventually(t, converge, "InvalidAnnotation for the item that is no regex", eventWith(ns, "bad-list", "InvalidAnnotation", "db["))
	badList := settled(t, ns, "bad-list")

	// Key-level, as with courier's own keys: named consumes only password.
	updateSecret(t, ns, "my-secret", func(x *corev1.Secret) { x.Data["other"] = []byte("x") })
	rolledOutOnce(t, ns, "my-app", myApp, "secret/my-secret")
	noRollout(t, ns, "named", named)
	myApp++

	updateSecret(t, ns, "my-secret", func(x *corev1.Secret) { x.Data["password"] = []byte("2") })
	rolledOutOnce(t, ns, "my-app", myApp, "secret/my-secret")
	rolledOutOnce(t, ns, "named", named, "secret/my-secret")
	rolledOutOnce(t, ns, "bad-list", badList, "secret/my-secret")
	noRollout(t, ns, "plain", plain)
	myApp++

	updateConfigMap(t, ns, "my-config", func(cm *corev1.ConfigMap) { cm.Data["mode"] = "2" })
	rolledOutOnce(t, ns, "my-app", myApp, "configmap/my-config")

	updateSecret(t, ns, "tagged", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	rolledOutOnce(t, ns, "searching", searching, "secret/tagged")
	searching++

	// untagged: search needs match on the Secret; ignoring consumes it
	// through auto, so it rolls; the ignored ConfigMap never rolls anything.
	updateSecret(t, ns, "untagged", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	rolledOutOnce(t, ns, "ignoring", ignoring, "secret/untagged")
	noRollout(t, ns, "searching", searching)
	ignoring++
	updateConfigMap(t, ns, "ignored", func(cm *corev1.ConfigMap) { cm.Data["k"] = "2" })
	noRollout(t, ns, "ignoring", ignoring)
}

// Without --compat, Reloader's annotations mean nothing to courier.
func TestReloaderAnnotationsAreIgnoredWithoutCompat(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "nocompat", nil)
	createSecret(t, ns, "my-secret", withData("password", "1"))
	createDeployment(t, ns, "my-app", map[string]string{"reloader.stakater.com/auto": "true"},
		podSpec(nil, []corev1.EnvFromSource{envFromSecret("my-secret")}, nil))
	seenAll(t, ns)
	before := unsettled(t, ns, "my-app")
	updateSecret(t, ns, "my-secret", func(x *corev1.Secret) { x.Data["password"] = []byte("2") })
	noRollout(t, ns, "my-app", before)
}

// namedNamespace creates the namespace name (the other tools' README
// examples name their namespaces), deleted when the test ends; one of that
// name still being deleted (an earlier run) is waited for.
func namedNamespace(t *testing.T, name string, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	eventually(t, time.Minute, "namespace "+name+" created", func(ctx context.Context) (bool, error) {
		_, err := admin().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	})
	t.Cleanup(func() { _ = admin().CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// compatReplica waits for a courier replica of src/name in ns made through
// the annotation via, with data.
func compatReplica(t *testing.T, src, ns, name, via string, data map[string][]byte) {
	t.Helper()
	eventually(t, converge, "replica in "+ns+" through "+via, secretWhere(ns, name, func(r *corev1.Secret) bool {
		return equalData(r.Data, data) && r.Labels[keyReplica] == "true" && r.Annotations[keySource] == src+"/"+name && r.Annotations["courier.dev/via"] == via
	}))
}

// SPEC (--compat=replicator,reflector): sources annotated exactly as
// kubernetes-replicator's and Reflector's READMEs show (data filled in where
// Reflector's README writes "...") are replicated where those tools document,
// as courier replicas naming the annotation; a copy the old tool made is
// left alone with a ReplicaConflict saying how to hand it over.
func TestCompatReplicatorAndReflectorSourcesReplicateAsTheyDocument(t *testing.T) {
	s := setupReplication(t, "--compat=replicator,reflector")
	myNS1 := namedNamespace(t, "my-ns-1", nil)
	ns1 := namedNamespace(t, "namespace-1", nil)
	ns2 := namedNamespace(t, "namespace-2", nil)
	nsX := namedNamespace(t, "namespace-x", nil)
	labelled := namedNamespace(t, "labelled-"+s.id, map[string]string{"my-label": "value", "my-other-label": "x"})
	excluded := namedNamespace(t, "excluded-"+s.id, map[string]string{"my-label": "value", "my-other-label": "foo"})
	data := map[string][]byte{"key1": []byte("value1")}

	// A copy kubernetes-replicator made earlier, in a namespace the source targets.
	createSecret(t, ns2, "by-name", withAnnotation("replicator.v1.mittwald.de/replicated-from-version", "680"), withData("key1", "old"))

	// kubernetes-replicator, push by name.
	createSecret(t, s.src, "by-name", withAnnotation("replicator.v1.mittwald.de/replicate-to", "my-ns-1,namespace-[0-9]*"), withData("key1", "value1"))
	for _, ns := range []string{myNS1, ns1} {
		compatReplica(t, s.src, ns, "by-name", "replicator.v1.mittwald.de/replicate-to", data)
	}
	eventually(t, converge, "ReplicaConflict naming the old copy", eventWith(s.src, "by-name", "ReplicaConflict", ns2, "kubernetes-replicator"))
	if got, _ := getSecret(t.Context(), ns2, "by-name"); got == nil || string(got.Data["key1"]) != "old" {
		t.Errorf("the old tool's copy was touched: %v", got)
	}
	deleteSecret(t, ns2, "by-name")
	compatReplica(t, s.src, ns2, "by-name", "replicator.v1.mittwald.de/replicate-to", data)

	// A pattern that does not compile changes nothing (the replicator would
	// skip the item): InvalidSelector, as for courier's own selector.
	createSecret(t, s.src, "bad-pattern", withAnnotation("replicator.v1.mittwald.de/replicate-to", "my-ns-1, namespace-[0-9"), withData("key1", "value1"))
	eventually(t, converge, "InvalidSelector for the pattern", eventWith(s.src, "bad-pattern", "InvalidSelector", "namespace-[0-9"))
	consistently(t, quiet, "nothing replicated from the bad pattern", secretGone(myNS1, "bad-pattern"))

	// courier status --compat shows the other tool's sources.
	out := courierStatus(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--compat=replicator,reflector", "-o", "json")
	if !strings.Contains(out, `"via": "replicator.v1.mittwald.de/replicate-to"`) || !strings.Contains(out, `"selector": "my-ns-1,namespace-[0-9]*"`) {
		t.Errorf("courier status --compat does not show the by-name source:\n%s", out)
	}

	// kubernetes-replicator, push by label (a folded YAML scalar keeps its newline).
	createSecret(t, s.src, "by-label", withAnnotation("replicator.v1.mittwald.de/replicate-to-matching", "my-label=value,my-other-label,my-other-label notin (foo,bar)\n"), withData("key1", "value1"))
	compatReplica(t, s.src, labelled, "by-label", "replicator.v1.mittwald.de/replicate-to-matching", data)

	// Reflector, automatic mirrors, Secret and ConfigMap.
	createSecret(t, s.src, "source-secret",
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-allowed", "true"),
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces", "namespace-1,namespace-2,namespace-[0-9]*"),
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-auto-enabled", "true"),
		withData("key1", "value1"))
	createConfigMap(t, s.src, "source-config-map", map[string]string{
		"reflector.v1.k8s.emberstack.com/reflection-allowed":            "true",
		"reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces": "namespace-1,namespace-2,namespace-[0-9]*",
		"reflector.v1.k8s.emberstack.com/reflection-auto-enabled":       "true",
	}, map[string]string{"key1": "value1"})
	for _, ns := range []string{ns1, ns2} {
		compatReplica(t, s.src, ns, "source-secret", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled", data)
		eventually(t, converge, "ConfigMap mirror in "+ns, configMapIn(ns, "source-config-map", map[string]string{"key1": "value1"}))
	}

	// Nothing where the tools would not copy.
	for _, miss := range []struct{ ns, name string }{
		{nsX, "by-name"}, {excluded, "by-label"}, {myNS1, "by-label"}, {nsX, "source-secret"}, {myNS1, "source-secret"},
	} {
		consistently(t, quiet, "no "+miss.name+" in "+miss.ns, secretGone(miss.ns, miss.name))
	}

	// A change to the source reaches every copy; removing the annotation
	// removes them, as it does with courier's own.
	updateSecret(t, s.src, "source-secret", func(x *corev1.Secret) { x.Data["key1"] = []byte("value2") })
	for _, ns := range []string{ns1, ns2} {
		compatReplica(t, s.src, ns, "source-secret", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled", map[string][]byte{"key1": []byte("value2")})
	}
	updateSecret(t, s.src, "source-secret", func(x *corev1.Secret) {
		delete(x.Annotations, "reflector.v1.k8s.emberstack.com/reflection-auto-enabled")
	})
	eventually(t, converge, "mirrors removed with auto-enabled", secretsGone("source-secret", ns1, ns2))
}

// SPEC (--compat=replicator,reflector): an object that pulls from a source
// (kubernetes-replicator's replicate-from, Reflector's reflects), annotated
// as their READMEs show, is filled with the source's content only where the
// source allows it the way that tool requires; it stays its owner's object
// (type, labels, other annotations, kubectl's last-applied configuration
// kept); a refusal is a PullRefused Event that writes nothing.
func TestCompatPullsAreHonouredOnlyWhereTheSourceAllows(t *testing.T) {
	s := setupReplication(t, "--compat=replicator,reflector")
	ns3 := namedNamespace(t, "namespace-3", nil)
	other := namedNamespace(t, "other-"+s.id, nil)
	applied := `{"apiVersion":"v1","kind":"Secret"}`

	// kubernetes-replicator: the README's source and target (source
	// namespace ours, not "default").
	createSecret(t, s.src, "some-secret",
		withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"),
		withAnnotation("replicator.v1.mittwald.de/replication-allowed-namespaces", "my-ns-1,namespace-[0-9]*"),
		withData("key1", "value1"))
	createSecret(t, ns3, "secret-replica",
		withAnnotation("replicator.v1.mittwald.de/replicate-from", s.src+"/some-secret"),
		withAnnotation("kubectl.kubernetes.io/last-applied-configuration", applied),
		withLabel("team", "a"))
	eventually(t, converge, "the target filled from the source", secretWhere(ns3, "secret-replica", func(r *corev1.Secret) bool {
		return string(r.Data["key1"]) == "value1" && r.Labels["team"] == "a" && r.Labels[keyReplica] == "" &&
			r.Annotations["kubectl.kubernetes.io/last-applied-configuration"] == applied &&
			r.Annotations["courier.dev/pulled-from"] == s.src+"/some-secret" && r.Annotations["courier.dev/via"] == "replicator.v1.mittwald.de/replicate-from"
	}))
	updateSecret(t, s.src, "some-secret", func(x *corev1.Secret) { x.Data["key1"] = []byte("value2") })
	eventually(t, converge, "a source change follows", secretIn(ns3, "secret-replica", map[string][]byte{"key1": []byte("value2")}))
	updateSecret(t, ns3, "secret-replica", func(x *corev1.Secret) { x.Data["key1"] = []byte("edited") })
	eventually(t, converge, "an edit is reverted", secretIn(ns3, "secret-replica", map[string][]byte{"key1": []byte("value2")}))
	eventually(t, converge, "ReplicaReverted", eventWith(ns3, "secret-replica", "ReplicaReverted", s.src+"/some-secret"))

	// The README's TLS target: its type stays, the source's keys fill it.
	createSecret(t, s.src, "tls-source",
		withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"),
		withAnnotation("replicator.v1.mittwald.de/replication-allowed-namespaces", "namespace-[0-9]*"),
		withData("tls.crt", "CRT"), withData("tls.key", "KEY"))
	tls := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "tls-target", Namespace: ns3,
		Annotations: map[string]string{"replicator.v1.mittwald.de/replicate-from": s.src + "/tls-source"}},
		Type: corev1.SecretTypeTLS, Data: map[string][]byte{"tls.key": {}, "tls.crt": {}}}
	if _, err := admin().CoreV1().Secrets(ns3).Create(t.Context(), tls, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "the TLS target filled", secretWhere(ns3, "tls-target", func(r *corev1.Secret) bool {
		return r.Type == corev1.SecretTypeTLS && string(r.Data["tls.crt"]) == "CRT" && string(r.Data["tls.key"]) == "KEY"
	}))

	// Refused: a namespace the source does not allow, and a source without
	// the allowed-namespaces list kubernetes-replicator requires.
	createSecret(t, other, "denied", withAnnotation("replicator.v1.mittwald.de/replicate-from", s.src+"/some-secret"), withData("mine", "x"))
	eventually(t, converge, "PullRefused for the namespace", eventWith(other, "denied", "PullRefused", "does not match namespace "+other))
	createSecret(t, s.src, "no-list", withAnnotation("replicator.v1.mittwald.de/replication-allowed", "true"), withData("k", "v"))
	createSecret(t, ns3, "wants-no-list", withAnnotation("replicator.v1.mittwald.de/replicate-from", s.src+"/no-list"), withData("mine", "x"))
	eventually(t, converge, "PullRefused for the missing list", eventWith(ns3, "wants-no-list", "PullRefused", "replication-allowed-namespaces"))
	disabled := namedNamespace(t, "namespace-4", map[string]string{"courier.dev/replication": "disabled"})
	createSecret(t, disabled, "secret-replica", withAnnotation("replicator.v1.mittwald.de/replicate-from", s.src+"/some-secret"), withData("mine", "x"))
	eventually(t, converge, "PullRefused for a namespace courier never replicates into", eventWith(disabled, "secret-replica", "PullRefused", "courier.dev/replication=disabled"))
	for _, name := range []struct{ ns, name string }{{other, "denied"}, {ns3, "wants-no-list"}, {disabled, "secret-replica"}} {
		consistently(t, quiet, name.name+" untouched", secretIn(name.ns, name.name, map[string][]byte{"mine": []byte("x")}))
	}

	// Reflector: the README's source and mirrors, Secret and ConfigMap.
	createSecret(t, s.src, "source-secret",
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-allowed", "true"),
		withAnnotation("reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces", "namespace-1,namespace-2,namespace-[0-9]*"),
		withData("key1", "value1"))
	createConfigMap(t, s.src, "source-config-map", map[string]string{
		"reflector.v1.k8s.emberstack.com/reflection-allowed":            "true",
		"reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces": "namespace-1,namespace-2,namespace-[0-9]*",
	}, map[string]string{"key1": "value1"})
	createSecret(t, ns3, "mirror-secret", withAnnotation("reflector.v1.k8s.emberstack.com/reflects", s.src+"/source-secret"))
	createConfigMap(t, ns3, "mirror-config-map", map[string]string{"reflector.v1.k8s.emberstack.com/reflects": s.src + "/source-config-map"}, nil)
	eventually(t, converge, "the Secret mirror", secretIn(ns3, "mirror-secret", map[string][]byte{"key1": []byte("value1")}))
	eventually(t, converge, "the ConfigMap mirror", configMapIn(ns3, "mirror-config-map", map[string]string{"key1": "value1"}))
	createSecret(t, other, "mirror-secret", withAnnotation("reflector.v1.k8s.emberstack.com/reflects", s.src+"/source-secret"))
	eventually(t, converge, "PullRefused for Reflector's list", eventWith(other, "mirror-secret", "PullRefused", "reflection-allowed-namespaces"))

	// The source goes: what a target holds stays (as with Reflector).
	deleteSecret(t, s.src, "source-secret")
	eventually(t, converge, "PullRefused: source gone", eventWith(ns3, "mirror-secret", "PullRefused", "does not exist"))
	consistently(t, quiet, "the mirror keeps its data", secretIn(ns3, "mirror-secret", map[string][]byte{"key1": []byte("value1")}))
}

// SPEC (--compat=reloader): the per-kind auto keys and the exclude lists
// select as in Reloader; restarting courier rolls nothing out, and a change
// made while it was down rolls out once, as with courier's own keys.
func TestCompatReloaderPerKindAutoExcludeAndRestarts(t *testing.T) {
	s := setupReplication(t, "--compat=reloader")
	ns := s.target(t, "kinds", nil)
	createSecret(t, ns, "s1", withData("k", "1"))
	createSecret(t, ns, "s2", withData("k", "1"))
	createConfigMap(t, ns, "c1", nil, map[string]string{"k": "1"})
	createDeployment(t, ns, "typed", map[string]string{"configmap.reloader.stakater.com/auto": "true"},
		podSpec(nil, []corev1.EnvFromSource{envFromSecret("s1"), envFromConfigMap("c1")}, nil))
	createDeployment(t, ns, "excluding", map[string]string{"reloader.stakater.com/auto": "true", "secrets.exclude.reloader.stakater.com/reload": "s1"},
		podSpec(nil, []corev1.EnvFromSource{envFromSecret("s1"), envFromSecret("s2")}, nil))
	typed, excluding := settled(t, ns, "typed"), settled(t, ns, "excluding")

	updateSecret(t, ns, "s1", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	noRollout(t, ns, "typed", typed)
	noRollout(t, ns, "excluding", excluding)
	updateConfigMap(t, ns, "c1", func(cm *corev1.ConfigMap) { cm.Data["k"] = "2" })
	rolledOutOnce(t, ns, "typed", typed, "configmap/c1")
	typed++

	s.courier.Stop()
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--compat=reloader")
	c.WaitReady(t.Context())
	noRollout(t, ns, "typed", typed)
	noRollout(t, ns, "excluding", excluding)

	c.Stop()
	updateSecret(t, ns, "s2", func(x *corev1.Secret) { x.Data["k"] = []byte("while-down") })
	c = startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src, "--compat=reloader")
	c.WaitReady(t.Context())
	rolledOutOnce(t, ns, "excluding", excluding, "secret/s2")
}

// SPEC (--compat=reloader with --reload-all): an auto set to anything but
// true opts a workload out of --reload-all, as Reloader's
// --auto-reload-all; an ignored object reloads nothing.
func TestCompatReloaderAutoFalseOptsOutOfReloadAll(t *testing.T) {
	s := setupReplication(t, "--compat=reloader", "--reload-all")
	ns := s.target(t, "all", nil)
	createSecret(t, ns, "db", withData("k", "1"))
	createSecret(t, ns, "quiet", withAnnotation("reloader.stakater.com/ignore", "true"), withData("k", "1"))
	createDeployment(t, ns, "opted-out", map[string]string{"reloader.stakater.com/auto": "false"}, podSpec(nil, []corev1.EnvFromSource{envFromSecret("db")}, nil))
	createDeployment(t, ns, "plain", nil, podSpec(nil, []corev1.EnvFromSource{envFromSecret("db"), envFromSecret("quiet")}, nil))
	seenAll(t, ns)
	optedOut, plain := unsettled(t, ns, "opted-out"), settled(t, ns, "plain")

	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	rolledOutOnce(t, ns, "plain", plain, "secret/db")
	noRollout(t, ns, "opted-out", optedOut)
	updateSecret(t, ns, "quiet", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	noRollout(t, ns, "plain", plain+1)
}
