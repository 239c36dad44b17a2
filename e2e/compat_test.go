package e2e

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// createDeploymentWithTemplate is createDeployment with annotations on the
// pod template too.
func createDeploymentWithTemplate(t *testing.T, ns, name string, annotations, templateAnnotations map[string]string, spec corev1.PodSpec) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: templateAnnotations}, Spec: spec},
		},
	}
	if _, err := admin().AppsV1().Deployments(ns).Create(t.Context(), d, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create deployment %s/%s: %v", ns, name, err)
	}
}

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
	myApp, named, searching, ignoring := settled(t, ns, "my-app"), settled(t, ns, "named"), settled(t, ns, "searching"), settled(t, ns, "ignoring")
	plain := unsettled(t, ns, "plain")

	updateSecret(t, ns, "my-secret", func(x *corev1.Secret) { x.Data["password"] = []byte("2") })
	rolledOutOnce(t, ns, "my-app", myApp, "secret/my-secret")
	rolledOutOnce(t, ns, "named", named, "secret/my-secret")
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
