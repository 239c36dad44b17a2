package inputs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
)

func yes() *bool { b := true; return &b }

func TestOf(t *testing.T) {
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Env: []corev1.EnvVar{
			{Name: "A", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "user"}}},
		}}},
		Containers: []corev1.Container{{
			Env: []corev1.EnvVar{
				{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}},
				{Name: "C", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "opt"}, Key: "k", Optional: yes()}}},
				{Name: "D", Value: "plain"},
				{Name: "E", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
		}},
		Volumes: []corev1.Volume{
			{Name: "v1", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: []corev1.KeyToPath{{Key: "tls.crt"}, {Key: "tls.key"}}}}},
			{Name: "v2", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}, Items: []corev1.KeyToPath{{Key: "ca.crt"}}}},
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
			}}}},
			{Name: "v3", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "v4", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io", VolumeAttributes: map[string]string{"secretProviderClass": "vault-db"}}}},
			{Name: "v5", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "other.csi.example", VolumeAttributes: map[string]string{"secretProviderClass": "not-this"}}}},
		},
	}
	want := []Ref{
		{Kind: "ConfigMap", Name: "ca", Keys: []string{"ca.crt"}},
		{Kind: "ConfigMap", Name: "opt", Keys: []string{"k"}, Optional: true},
		{Kind: "ConfigMap", Name: "settings"},
		{Kind: "Secret", Name: "db"}, // keyRefs plus a whole projected source: every key
		{Kind: "Secret", Name: "tls", Keys: []string{"tls.crt", "tls.key"}},
		{Kind: "SecretProviderClass", Name: "vault-db", Optional: true}, // the driver's only
	}
	if diff := cmp.Diff(want, Of(spec)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestOfMergesKeyRefsToOneObject(t *testing.T) {
	ref := func(key string) corev1.EnvVar {
		return corev1.EnvVar{Name: key, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: key}}}
	}
	spec := &corev1.PodSpec{Containers: []corev1.Container{{Env: []corev1.EnvVar{ref("b"), ref("a"), ref("b")}}}}
	if diff := cmp.Diff([]Ref{{Kind: "Secret", Name: "s", Keys: []string{"a", "b"}}}, Of(spec)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestParseReloadOn(t *testing.T) {
	got, err := ParseReloadOn(" secret/a, ConfigMap/b ,,")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]bool{"secret/a": true, "configmap/b": true}, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	got, err = ParseReloadOn("secret/a, deployment/x, secret, secret/ns/x")
	if err == nil {
		t.Errorf("accepted invalid entries")
	}
	if diff := cmp.Diff(map[string]bool{"secret/a": true}, got); diff != "" {
		t.Errorf("valid entries (-want +got):\n%s", diff)
	}
}
