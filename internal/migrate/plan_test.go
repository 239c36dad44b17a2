package migrate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/status"
)

func secret(ns, name string, a map[string]string) status.Object {
	return status.Object{Kind: "Secret", Meta: &metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: a}}
}

func deployment(ns, name string, a map[string]string, spec corev1.PodSpec) status.Workload {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: a}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: spec}}}
	return status.WorkloadOf(d)
}

func envFrom(names ...string) corev1.PodSpec {
	var ef []corev1.EnvFromSource
	for _, n := range names {
		ef = append(ef, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}})
	}
	return corev1.PodSpec{Containers: []corev1.Container{{Name: "app", EnvFrom: ef}}}
}

func TestPlanMapsWhatItCanAndSaysWhatItCannot(t *testing.T) {
	c := status.Cluster{
		Namespaces: []corev1.Namespace{{ObjectMeta: metav1.ObjectMeta{Name: "team-1"}}, {ObjectMeta: metav1.ObjectMeta{Name: "team-2"}}, {ObjectMeta: metav1.ObjectMeta{Name: "other"}}},
		Objects: []status.Object{
			secret("platform", "union", map[string]string{"replicator.v1.mittwald.de/replicate-to": "a", "replicator.v1.mittwald.de/replicate-to-matching": "x=y"}),
			secret("platform", "pattern", map[string]string{"replicator.v1.mittwald.de/replicate-to": "team-[0-9]+"}),
			secret("platform", "mirror-all", map[string]string{"reflector.v1.k8s.emberstack.com/reflection-allowed": "true", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled": "true"}),
			secret("platform", "mirror-selected", map[string]string{"reflector.v1.k8s.emberstack.com/reflection-allowed": "true", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled": "true",
				"reflector.v1.k8s.emberstack.com/reflection-allowed-namespaces-selector": "tier!=secret", "reflector.v1.k8s.emberstack.com/reflection-auto-namespaces-selector": "env=prod"}),
			secret("platform", "mirror-list-or-selector", map[string]string{"reflector.v1.k8s.emberstack.com/reflection-allowed": "true", "reflector.v1.k8s.emberstack.com/reflection-auto-enabled": "true",
				"reflector.v1.k8s.emberstack.com/reflection-auto-namespaces": "team-1", "reflector.v1.k8s.emberstack.com/reflection-auto-namespaces-selector": "env=prod"}),
			secret("elsewhere", "stray", map[string]string{"replicator.v1.mittwald.de/replicate-to-matching": "x=y"}),
			secret("team-1", "ignored", map[string]string{"reloader.stakater.com/ignore": "true"}),
			secret("team-1", "db", nil),
		},
		Workloads: []status.Workload{
			deployment("team-1", "web", map[string]string{"reloader.stakater.com/auto": "true", "reloader.stakater.com/rollout-strategy": "restart"}, envFrom("db", "ignored")),
			deployment("team-1", "listed", map[string]string{"secret.reloader.stakater.com/reload": "d.*, unused"}, envFrom("db")),
			deployment("team-1", "paused", map[string]string{"reloader.stakater.com/auto": "true", "deployment.reloader.stakater.com/pause-period": "5m"}, envFrom("db")),
			deployment("team-1", "both", map[string]string{"reloader.stakater.com/auto": "true", "courier.dev/reload": "true"}, envFrom("db")),
		},
	}
	r := Plan(c, Options{SourceNamespaces: globs.List{"platform"}})
	got := map[string]Object{}
	for _, o := range r.Objects {
		got[o.Namespace+"/"+o.Name] = o
	}
	adds := map[string]map[string]string{}
	for k, o := range got {
		if o.Add != nil {
			adds[k] = o.Add
		}
	}
	want := map[string]map[string]string{
		"platform/pattern":         {"courier.dev/replicate-to": "kubernetes.io/metadata.name in (team-1,team-2)"},
		"platform/mirror-all":      {"courier.dev/replicate-to": "*"},
		"platform/mirror-selected": {"courier.dev/replicate-to": "tier!=secret,env=prod"},
		"elsewhere/stray":          {"courier.dev/replicate-to": "x=y"},
		"team-1/web":               {"courier.dev/reload-on": "secret/db"},
		"team-1/listed":            {"courier.dev/reload-on": "secret/db, secret/unused"}, // unused: named, not consumed: read whole
		"team-1/paused":            {"courier.dev/reload": "true", "courier.dev/reload-min-interval": "5m"},
	}
	if diff := cmp.Diff(want, adds); diff != "" {
		t.Errorf("adds (-want +got):\n%s", diff)
	}
	for _, n := range []struct{ object, annotation, says string }{
		{"platform/union", "replicator.v1.mittwald.de/replicate-to", "union"},
		{"platform/pattern", "replicator.v1.mittwald.de/replicate-to", "created later"},
		{"elsewhere/stray", "replicator.v1.mittwald.de/replicate-to-matching", "--source-namespaces"},
		{"platform/mirror-list-or-selector", "reflector.v1.k8s.emberstack.com/reflection-auto-namespaces-selector", "the list or the selector"},
		{"team-1/ignored", "reloader.stakater.com/ignore", "no per-object opt-out"},
		{"team-1/web", "reloader.stakater.com/rollout-strategy", "own strategy"},
		{"team-1/listed", "secret.reloader.stakater.com/reload", "is a pattern"},
		{"team-1/both", "courier.dev/reload", "already carries"},
	} {
		found := false
		for _, nh := range got[n.object].NotHonoured {
			found = found || (nh.Annotation == n.annotation && strings.Contains(nh.Why, n.says))
		}
		if !found {
			t.Errorf("%s: no note on %s saying %q: %+v", n.object, n.annotation, n.says, got[n.object].NotHonoured)
		}
	}
}
