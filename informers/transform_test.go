package informers

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

const secretValue = "hunter2-super-secret-value"

func allowPlatform(ns string) bool { return ns == "platform" }

type objOpt func(*metav1.ObjectMeta)

func withName(name string) objOpt  { return func(m *metav1.ObjectMeta) { m.Name = name } }
func inNamespace(ns string) objOpt { return func(m *metav1.ObjectMeta) { m.Namespace = ns } }
func annotated(k, v string) objOpt {
	return func(m *metav1.ObjectMeta) {
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[k] = v
	}
}
func labelled(k, v string) objOpt {
	return func(m *metav1.ObjectMeta) {
		if m.Labels == nil {
			m.Labels = map[string]string{}
		}
		m.Labels[k] = v
	}
}

func objMeta(opts ...objOpt) metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Name:          "obj",
		Namespace:     "platform",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		Annotations: map[string]string{
			corev1.LastAppliedConfigAnnotation: `{"data":{"password":"` + secretValue + `"}}`,
			"team":                             "a",
		},
	}
	for _, o := range opts {
		o(&m)
	}
	return m
}

func secret(opts ...objOpt) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: objMeta(opts...),
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"password": []byte(secretValue), "user": []byte("admin")},
	}
}

func configMap(opts ...objOpt) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: objMeta(opts...),
		Data:       map[string]string{"password": secretValue},
		BinaryData: map[string][]byte{"blob": []byte(secretValue)},
	}
}

func transform(t *testing.T, obj any) any {
	t.Helper()
	out, err := Transform(SourcesIn(role.Config{Allowed: allowPlatform, Namespace: "courier",
		Compat: source.Compat{Replicator: true, Reflector: true}}), everything)(obj)
	if err != nil {
		t.Fatalf("transform: %v", err)
	}
	return out
}

// leaks reports whether the serialized object holds the secret value, plain or base64.
func leaks(t *testing.T, obj any) bool {
	t.Helper()
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	return strings.Contains(s, secretValue) || strings.Contains(s, base64.StdEncoding.EncodeToString([]byte(secretValue)))
}

func TestTransformSecretsAndConfigMaps(t *testing.T) {
	tests := []struct {
		name       string
		obj        metav1.Object
		keepValues bool
	}{
		{"plain secret", secret(), false},
		{"replica secret", secret(labelled(wellknown.Replica, "true"), annotated(wellknown.Source, "platform/obj")), false},
		{"source secret", secret(annotated(wellknown.ReplicateTo, "*")), true},
		{"protected secret", secret(labelled(wellknown.Protect, "true")), true},
		{"protect=false secret", secret(labelled(wellknown.Protect, "false")), false},
		{"source outside allowed namespaces", secret(inNamespace("tenant"), annotated(wellknown.ReplicateTo, "*")), false},
		{"plain configmap", configMap(), false},
		{"source configmap", configMap(annotated(wellknown.ReplicateTo, "env=prod")), true},
		{"protected configmap elsewhere", configMap(inNamespace("tenant"), labelled(wellknown.Protect, "true")), false},
		// An object that pulls is patched, never updated whole: nothing of it
		// is kept, kubectl's last-applied configuration (values) included.
		{"a secret that pulls", secret(inNamespace("tenant"), annotated(source.MittwaldReplicateFrom, "platform/db")), false},
		{"a configmap whose pull is refused", configMap(inNamespace("tenant"), annotated(source.ReflectorReflects, "platform/nothing")), false},
		{"a source that also pulls keeps its values", secret(annotated(wellknown.ReplicateTo, "*"), annotated(source.ReflectorReflects, "other/db")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := entries(tt.obj)
			out := transform(t, tt.obj).(metav1.Object)

			if got := out.GetManagedFields(); got != nil {
				t.Errorf("managedFields kept: %v", got)
			}
			if _, ok := out.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; ok {
				t.Errorf("last-applied annotation kept")
			}
			// A digested object without courier's or a compatible tool's
			// marks holds no labels or annotations (role.Marked).
			if keep := tt.keepValues || role.Marked(tt.obj); (out.GetAnnotations()["team"] == "a") != keep {
				t.Errorf("user annotation kept: %t, want %t (%v)", !keep, keep, out.GetAnnotations())
			}
			if got := content.IsDigested(out); got == tt.keepValues {
				t.Errorf("IsDigested = %v, want %v", got, !tt.keepValues)
			}
			if got := leaks(t, out); got != tt.keepValues {
				t.Errorf("secret value present = %v, want %v", got, tt.keepValues)
			}
			// Digested or not, the per-key digests are what they were.
			if diff := cmp.Diff(before, entries(out)); diff != "" {
				t.Errorf("per-key digests changed (-want +got):\n%s", diff)
			}
			// Idempotent: a second pass changes nothing.
			again := transform(t, out)
			if content.IsDigested(out) {
				if again != out {
					t.Error("second transform made a new object")
				}
			} else if diff := cmp.Diff(out, again); diff != "" {
				t.Errorf("second transform changed the object (-want +got):\n%s", diff)
			}
		})
	}
}

// everything is consumed by some workload.
func everything(string, string, string) bool { return true }

// A Secret or ConfigMap that bears no mark courier reads and that no
// workload consumes is held as its metadata only: not even digests. A
// consumed one, or one courier manages, is held as digests.
func TestTransformHoldsOnlyMetadataOfWhatNobodyConsumes(t *testing.T) {
	immutable := true
	consumedOnly := func(kind, namespace, name string) bool {
		return kind == wellknown.KindSecret && namespace == "platform" && name == "consumed"
	}
	tests := []struct {
		name string
		obj  metav1.Object
		read bool
	}{
		{"a tenant's Secret", secret(), false},
		{"a tenant's ConfigMap", configMap(), false},
		{"a consumed Secret", secret(withName("consumed")), true},
		{"a ConfigMap of the consumed Secret's name", configMap(withName("consumed")), false},
		{"a replica", secret(labelled(wellknown.Replica, "true"), annotated(wellknown.Source, "platform/obj")), true},
		{"one with Reloader's annotation", configMap(annotated("reloader.stakater.com/match", "true")), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if s, ok := tt.obj.(*corev1.Secret); ok {
				s.Type, s.Immutable = corev1.SecretTypeTLS, &immutable
			}
			tt.obj.SetUID("0b7e4c1a-6f0e-4c53-9a52-3d0f7d8b9e21")
			tt.obj.SetResourceVersion("4711")
			want := tt.obj.(runtime.Object).DeepCopyObject().(metav1.Object)
			tf := Transform(SourcesIn(role.Config{Allowed: allowPlatform, Namespace: "courier"}), consumedOnly)
			out, err := tf(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if got := content.Read(out); got != tt.read {
				t.Fatalf("Read = %t, want %t", got, tt.read)
			}
			if got := len(content.Entries(out)) > 0; got != tt.read {
				t.Errorf("holds digests: %t, want %t", got, tt.read)
			}
			if leaks(t, out) {
				t.Error("a value is held")
			}
			m := out.(metav1.Object)
			if m.GetName() != want.GetName() || m.GetNamespace() != want.GetNamespace() || m.GetUID() != want.GetUID() || m.GetResourceVersion() != want.GetResourceVersion() {
				t.Errorf("metadata %s/%s %s %s, want %s/%s %s %s", m.GetNamespace(), m.GetName(), m.GetUID(), m.GetResourceVersion(),
					want.GetNamespace(), want.GetName(), want.GetUID(), want.GetResourceVersion())
			}
			_, typ, imm, _ := content.Fields(out)
			_, wantTyp, wantImm, _ := content.Fields(want)
			if typ != wantTyp || (imm == nil) != (wantImm == nil) {
				t.Errorf("type %q immutable %v, want %q %v", typ, imm, wantTyp, wantImm)
			}
			if again, _ := tf(out); again != out {
				t.Error("second transform made a new object")
			}
		})
	}
}

func entries(obj metav1.Object) map[string]content.Entry {
	out := map[string]content.Entry{}
	for _, e := range content.Entries(obj) {
		out[e.Key] = e
	}
	return out
}

// A workload is cached as a workload.Object: its metadata without labels,
// managed fields or last-applied; its pod template's annotations; what the
// template consumes. Nothing of the pod spec itself.
func TestTransformCachesWorkloadsAsObjects(t *testing.T) {
	secretKey := &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}, Key: "password"}}
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "registry.example/app:1", Command: []string{"/app", "--serve"},
			Env: []corev1.EnvVar{
				{Name: "MODE", Value: strings.Repeat("literal ", 100)},
				{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "PASSWORD", ValueFrom: secretKey},
			},
			EnvFrom:        []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
			ReadinessProbe: &corev1.Probe{InitialDelaySeconds: 5},
		}
	}
	template := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{wellknown.ConfigHash: "abc", "team": "a"}},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{container("init")},
			Containers:     []corev1.Container{container("app")},
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Items: []corev1.KeyToPath{{Key: "crt", Path: "crt"}}}}},
			},
			ServiceAccountName: "app",
		},
	}
	m := objMeta(annotated(wellknown.Reload, "true"))
	m.Labels = map[string]string{"app.kubernetes.io/name": "web"}
	m.Generation = 4
	objects := map[string]any{
		workload.Deployment: &appsv1.Deployment{ObjectMeta: m, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: template.Labels}, Template: template},
			Status: appsv1.DeploymentStatus{Replicas: 3, ReadyReplicas: 2}},
		workload.StatefulSet: &appsv1.StatefulSet{ObjectMeta: m, Spec: appsv1.StatefulSetSpec{Template: template}},
		workload.DaemonSet:   &appsv1.DaemonSet{ObjectMeta: m, Spec: appsv1.DaemonSetSpec{Template: template}},
		workload.CronJob: &batchv1.CronJob{ObjectMeta: m, Spec: batchv1.CronJobSpec{Schedule: "@daily",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}},
	}
	sums := map[uint64][]string{}
	for kind, obj := range objects {
		group := "apps/v1"
		if kind == workload.CronJob {
			group = "batch/v1"
		}
		want := &workload.Object{
			TypeMeta:            metav1.TypeMeta{APIVersion: group, Kind: kind},
			Meta:                objmeta.From(&metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Annotations: map[string]string{wellknown.Reload: "true", "team": "a"}}, true),
			Templated:           true,
			TemplateAnnotations: objmeta.PairsOf(template.Annotations),
			Refs:                inputs.Of(&template.Spec),
			Hash:                "abc",
		}
		out := transform(t, obj)
		// The same template gives the same fingerprint in every kind.
		want.TemplateSum = out.(*workload.Object).TemplateSum
		want.SetGeneration(4)
		if kind != workload.CronJob {
			want.Health = workload.Progressing // its status has not observed generation 4
		}
		if diff := cmp.Diff(want, out); diff != "" || want.TemplateSum == 0 {
			t.Errorf("%s cached as (-want +got):\n%s (TemplateSum %x)", kind, diff, want.TemplateSum)
		}
		if sums[want.TemplateSum] = append(sums[want.TemplateSum], kind); len(sums) != 1 {
			t.Errorf("one template, several fingerprints: %v", sums)
		}
		if got := workload.KindOf(out); got != kind {
			t.Errorf("KindOf(cached %s) = %q", kind, got)
		}
		if again := transform(t, out.(*workload.Object).DeepCopyObject()); !cmp.Equal(again, out) {
			t.Errorf("the transform is not idempotent on a cached %s", kind)
		}
	}
}

func TestTransformNamespaceKeepsNameLabelsAndWhetherItGoes(t *testing.T) {
	now := metav1.Now()
	for _, c := range []struct {
		name        string
		ns          *corev1.Namespace
		terminating bool
	}{
		{"deleted", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", DeletionTimestamp: &now}}, true},
		{"terminating", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}, true},
		{"active", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceActive}}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.ns.Labels = map[string]string{"env": "prod"}
			c.ns.Annotations = map[string]string{"note": strings.Repeat("x", 1000)}
			c.ns.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
			c.ns.Spec.Finalizers = []corev1.FinalizerName{"kubernetes"}
			out := transform(t, c.ns).(*namespaces.Namespace)
			if got, _ := transform(t, out).(*namespaces.Namespace); got != out {
				t.Error("a transformed namespace is transformed again")
			}
			if out.GetName() != "team-a" || namespaces.Terminating(out) != c.terminating {
				t.Errorf("%s terminating %v, want team-a terminating %v", out.GetName(), namespaces.Terminating(out), c.terminating)
			}
			if diff := cmp.Diff(map[string]string{"env": "prod"}, out.GetLabels()); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
			if !labels.SelectorFromSet(labels.Set{"env": "prod"}).Matches(out.Labels()) || out.Labels().Has("team") {
				t.Error("a selector reads the labels wrong")
			}
			if len(out.GetAnnotations()) > 0 || len(out.GetManagedFields()) > 0 {
				t.Errorf("annotations %v and managed fields %v kept", out.GetAnnotations(), out.GetManagedFields())
			}
		})
	}
}

func TestSecretFieldSelectorExcludesHelm(t *testing.T) {
	if got, want := SecretFieldSelector, "type!=helm.sh/release.v1"; got != want {
		t.Errorf("SecretFieldSelector = %q, want %q", got, want)
	}
}
