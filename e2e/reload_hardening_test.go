package e2e

// Reload items of the hardening review (issue 13).

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/content"
)

func getDeployment(t *testing.T, ns, name string) *appsv1.Deployment {
	t.Helper()
	d, err := admin().AppsV1().Deployments(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func updateDeployment(t *testing.T, ns, name string, change func(*appsv1.Deployment)) {
	t.Helper()
	updateOnConflict(t, "deployment "+ns+"/"+name, func(ctx context.Context) error {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(d)
		_, err = admin().AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	})
}

// baselined waits until courier has written a baseline naming input on ns/name.
func baselined(t *testing.T, ns, name, input string) {
	t.Helper()
	eventually(t, 10*time.Second, "baseline of "+ns+"/"+name+" names "+input, func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && containsID(d.Annotations[keyInputs], input), err
	})
}

func containsID(baseline, id string) bool {
	for _, part := range strings.Split(baseline, ",") {
		if strings.HasPrefix(part, id+"=") {
			return true
		}
	}
	return false
}

// Item 11: annotating an existing source courier.dev/reload=true opts in
// the consumers of its replicas at once, so the next change rolls them out;
// and a change made in the same apply as the opt-in rolls out too.
func TestSourceSideOptInAddedLater(t *testing.T) {
	t.Run("opt-in, then a change", func(t *testing.T) {
		s := setupReplication(t)
		dst := s.target(t, "dst", nil)
		createSecret(t, s.src, "db", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "1"))
		eventually(t, converge, "replica", secretIn(dst, "db", map[string][]byte{"k": []byte("1")}))
		createDeployment(t, dst, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
		createDeployment(t, s.src, "local", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
		g0, l0 := unsettled(t, dst, "app"), unsettled(t, s.src, "local")

		updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Annotations[keyReload] = "true" })
		baselined(t, dst, "app", "secret/db")
		baselined(t, s.src, "local", "secret/db")
		noRollout(t, dst, "app", g0)

		updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
		rolledOutOnce(t, dst, "app", g0, "secret/db")
		rolledOutOnce(t, s.src, "local", l0, "secret/db")
	})
	t.Run("opt-in and a change in one apply", func(t *testing.T) {
		s := setupReplication(t)
		dst := s.target(t, "dst", nil)
		createSecret(t, s.src, "db", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "1"))
		eventually(t, converge, "replica", secretIn(dst, "db", map[string][]byte{"k": []byte("1")}))
		createDeployment(t, dst, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
		createDeployment(t, s.src, "local", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
		g0, l0 := unsettled(t, dst, "app"), unsettled(t, s.src, "local")
		time.Sleep(time.Second) // the workloads are older than the change, as in a real cluster

		updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Annotations[keyReload] = "true"; x.Data["k"] = []byte("2") })
		rolledOutOnce(t, dst, "app", g0, "secret/db")
		rolledOutOnce(t, s.src, "local", l0, "secret/db")
	})
}

// Item 12: opting out and in again, on the workload or on the input, starts
// afresh: changes made while opted out are not rolled out; the next one is.
func TestOptOutAndInAgain(t *testing.T) {
	tests := []struct {
		name       string
		out, again func(t *testing.T, ns string)
	}{
		{"workload reload false, then true",
			func(t *testing.T, ns string) {
				updateDeployment(t, ns, "app", func(d *appsv1.Deployment) { d.Annotations[keyReload] = "false" })
			},
			func(t *testing.T, ns string) {
				updateDeployment(t, ns, "app", func(d *appsv1.Deployment) { d.Annotations[keyReload] = "true" })
			}},
		{"input opt-in removed, then added",
			func(t *testing.T, ns string) {
				updateSecret(t, ns, "db", func(x *corev1.Secret) { delete(x.Annotations, keyReload) })
			},
			func(t *testing.T, ns string) {
				updateSecret(t, ns, "db", func(x *corev1.Secret) { metav1.SetMetaDataAnnotation(&x.ObjectMeta, keyReload, "true") })
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := setupReplication(t)
			ns := s.target(t, "apps", nil)
			workloadOptIn := map[string]string{}
			if tt.name[0] == 'w' {
				workloadOptIn[keyReload] = "true"
				createSecret(t, ns, "db", withData("k", "1"))
			} else {
				createSecret(t, ns, "db", withAnnotation(keyReload, "true"), withData("k", "1"))
			}
			createDeployment(t, ns, "app", workloadOptIn, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
			g0 := settled(t, ns, "app")

			tt.out(t, ns)
			eventually(t, 10*time.Second, "baseline removed", func(ctx context.Context) (bool, error) {
				d, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				_, has := d.Annotations[keyInputs]
				return !has, nil
			})
			updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("while-out") })
			noRollout(t, ns, "app", g0)
			tt.again(t, ns)
			baselined(t, ns, "app", "secret/db")
			noRollout(t, ns, "app", g0)
			updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("after") })
			rolledOutOnce(t, ns, "app", g0, "secret/db")
		})
	}
}

// Item 13: a rollout that would write nothing to the pod template (it holds
// that content's hash already, e.g. after `kubectl rollout undo` and the
// content set back) is neither a Reloaded Event nor a counted reload.
func TestARolloutThatWritesNothingIsNotAReload(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "apps", nil)
	createSecret(t, ns, "db", withAnnotation(keyReload, "true"), withData("k", "A"))
	createDeployment(t, ns, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "k")}, nil, nil))
	g := settled(t, ns, "app")
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("B") })
	rolledOutOnce(t, ns, "app", g, "secret/db")
	hashB := getDeployment(t, ns, "app").Spec.Template.Annotations[keyConfigHash]
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("C") })
	rolledOutOnce(t, ns, "app", g+1, "secret/db")
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_reloader_reloads_total{kind="Deployment",result="success"}`: 2})

	// kubectl rollout undo: the template of B's revision back.
	updateDeployment(t, ns, "app", func(d *appsv1.Deployment) { d.Spec.Template.Annotations[keyConfigHash] = hashB })
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("B") })
	eventually(t, 10*time.Second, "the baseline follows the content", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && d.Spec.Template.Annotations[keyConfigHash] == hashB && d.Annotations[keyInputs] != "", err
	})
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_reloader_reloads_total{kind="Deployment",result="success"}`: 2})
	evs, err := admin().CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=app,reason=Reloaded"})
	if err != nil {
		t.Fatal(err)
	}
	count := 0
	for _, e := range evs.Items {
		count += int(max(e.Count, 1))
	}
	if count != 2 {
		t.Errorf("%d Reloaded events, want 2", count)
	}
}

// Item 14: a change that removes a key a workload consumes (not optional)
// is treated like a deleted input: InputMissing naming the key, no rollout;
// the rollout comes once the key is back.
func TestARemovedConsumedKeyIsInputMissingNotARollout(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "apps", nil)
	createSecret(t, ns, "db", withAnnotation(keyReload, "true"), withData("password", "1"), withData("user", "a"))
	createDeployment(t, ns, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "password"), keyRef("secret", "db", "user")}, nil, nil))
	g := settled(t, ns, "app")
	updateSecret(t, ns, "db", func(x *corev1.Secret) { delete(x.Data, "password"); x.Data["user"] = []byte("b") })
	eventually(t, 10*time.Second, "InputMissing naming the key", eventWith(ns, "app", "InputMissing", "secret/db", "password"))
	noRollout(t, ns, "app", g)
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("2") })
	rolledOutOnce(t, ns, "app", g, "secret/db")
}

// Item 16: the digests on workloads are keyed with a secret only courier
// reads, kept in its namespace so restarts agree: they are not the plain
// sha256 of the consumed value, and a restart rolls nothing out.
func TestWorkloadDigestsAreKeyed(t *testing.T) {
	s := setupReplication(t)
	ns := s.target(t, "apps", nil)
	createSecret(t, ns, "db", withAnnotation(keyReload, "true"), withData("password", "hunter2"))
	createDeployment(t, ns, "app", nil, podSpec([]corev1.EnvVar{keyRef("secret", "db", "password")}, nil, nil))
	g := settled(t, ns, "app")

	key, err := getSecret(t.Context(), s.courier.namespace, "courier-digest-key")
	if err != nil || len(key.Data["key"]) != 32 || key.Labels["courier.dev/digest-key"] != "true" {
		t.Fatalf("the digest key in courier's namespace: %v %v", key, err)
	}
	unkeyed := content.Hash([]content.Entry{{Binary: true, Key: "password", Digest: content.Digest([]byte("hunter2"))}})[:16]
	inputs := getDeployment(t, ns, "app").Annotations[keyInputs]
	if !strings.Contains(inputs, "secret/db=") || strings.Contains(inputs, unkeyed) || !strings.HasPrefix(inputs, "key=") {
		t.Errorf("%s = %q: want a keyed digest of secret/db (not the plain %s) and the key's name", keyInputs, inputs, unkeyed)
	}

	s.courier.Stop()
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitLeader(t.Context())
	noRollout(t, ns, "app", g)
	if got := getDeployment(t, ns, "app").Annotations[keyInputs]; got != inputs {
		t.Errorf("the restart rewrote the baseline: %q → %q", inputs, got)
	}
	updateSecret(t, ns, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("correct horse") })
	rolledOutOnce(t, ns, "app", g, "secret/db")
}
