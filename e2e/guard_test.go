package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

const keyProtect = "courier.dev/protect"

func TestEditedReplicaIsRevertedToTheSource(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "cfg", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	want := map[string][]byte{"k": []byte("v")}
	eventually(t, converge, "replica", secretIn(dst, "cfg", want))

	tests := []struct {
		name   string
		change func(*corev1.Secret)
	}{
		{"data edited", func(r *corev1.Secret) { r.Data["k"] = []byte("hacked") }},
		{"key added", func(r *corev1.Secret) { r.Data["extra"] = []byte("x") }},
		{"managed-by label removed", func(r *corev1.Secret) { delete(r.Labels, keyManagedBy) }},
		{"source annotation changed", func(r *corev1.Secret) { r.Annotations[keySource] = "elsewhere/cfg" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			updateSecret(t, dst, "cfg", tt.change)
			withinSpec(t, "reverted", func(ctx context.Context) (bool, error) {
				r, err := getSecret(ctx, dst, "cfg")
				if err != nil {
					return false, err
				}
				return equalData(r.Data, want) && r.Labels[keyManagedBy] == "courier" && r.Annotations[keySource] == s.src+"/cfg", nil
			})
		})
	}
	eventually(t, converge, "ReplicaReverted event on the replica", eventWith(dst, "cfg", "ReplicaReverted", s.src+"/cfg"))
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_replicator_reverts_total{kind="Secret"}`: 4})
}

func TestAWriterThatKeepsFightingIsBackedOffNotLooped(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "contested", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	want := map[string][]byte{"k": []byte("v")}
	eventually(t, converge, "replica", secretIn(dst, "contested", want))

	// The other writer sets its value again each time courier reverted it:
	// the first five edits are reverted (waited for as long as converging
	// takes, so a slow machine cannot lose one), the sixth is not.
	for i := range 6 {
		mine := map[string][]byte{"k": []byte(fmt.Sprintf("writer-%d", i))}
		updateSecret(t, dst, "contested", func(r *corev1.Secret) { r.Data = mine })
		if i < 5 {
			eventually(t, converge, fmt.Sprintf("edit %d reverted", i+1), secretIn(dst, "contested", want))
			continue
		}
		consistently(t, quiet, "the sixth edit, past the budget of 5 reverts a minute, is left alone", secretIn(dst, "contested", mine))
	}
	eventually(t, converge, "ReplicaContested event", eventWith(dst, "contested", "ReplicaContested", "more than 5 reverts"))
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{ // within the 10 s backoff
		`courier_guard_replicas_contested_total{kind="Secret"}`:        1,
		`courier_replicator_replicas{kind="Secret",state="contested"}`: 1,
	})
	if n := strings.Count(s.courier.Logs(), `"msg":"replica written"`); n > 1+5 {
		t.Errorf("courier wrote the replica %d times (1 create + 5 reverts allowed)", n)
	}
}

func TestDeletedProtectedSourceIsRestoredAndItsReplicasKept(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	orig := createSecret(t, s.src, "root-ca",
		withLabel(keyProtect, "true"), withLabel("team", "platform"),
		withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation("note", "keep me"),
		withData("ca.crt", "PEM"), func(x *corev1.Secret) { x.Type = "example.com/ca" })
	eventually(t, converge, "replica", secretIn(dst, "root-ca", orig.Data))
	replica, _ := getSecret(t.Context(), dst, "root-ca")

	deleteSecret(t, s.src, "root-ca")
	eventually(t, converge, "protected source restored", func(ctx context.Context) (bool, error) {
		got, err := getSecret(ctx, s.src, "root-ca")
		if err != nil {
			return false, nil
		}
		return got.UID != orig.UID, nil
	})
	got, _ := getSecret(t.Context(), s.src, "root-ca")
	if diff := cmp.Diff(orig.Labels, got.Labels); diff != "" {
		t.Errorf("restored labels (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(orig.Annotations, got.Annotations); diff != "" {
		t.Errorf("restored annotations (-want +got):\n%s", diff)
	}
	if got.Type != orig.Type || !equalData(got.Data, orig.Data) {
		t.Errorf("restored type %q data %v, want %q %v", got.Type, got.Data, orig.Type, orig.Data)
	}
	eventually(t, converge, "SourceRestored event", eventWith(s.src, "root-ca", "SourceRestored", keyProtect))
	consistently(t, quiet, "the replica was never deleted", func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, dst, "root-ca")
		return err == nil && r.UID == replica.UID, err
	})
}

func TestProtectedSourceRetiredByRemovingTheLabelFirst(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "old", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	eventually(t, converge, "replica", secretIn(dst, "old", map[string][]byte{"k": []byte("v")}))
	updateSecret(t, s.src, "old", func(x *corev1.Secret) { delete(x.Labels, keyProtect) })
	deleteSecret(t, s.src, "old")
	eventually(t, converge, "replicas deleted with the retired source", secretGone(dst, "old"))
	consistently(t, quiet, "the retired source stays deleted", secretGone(s.src, "old"))
}

func TestOneSourceChangeIsExactlyOneWritePerReplica(t *testing.T) {
	s := setupReplication(t)
	var targets []string
	for range 6 {
		targets = append(targets, s.target(t, "t", nil))
	}
	createSecret(t, s.src, "one", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v1"))
	for _, ns := range targets {
		eventually(t, converge, "replica in "+ns, secretIn(ns, "one", map[string][]byte{"k": []byte("v1")}))
	}
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_workqueue_depth{name="replicator"}`: 0})
	before := apiserverWrites(t, "secrets")

	updateSecret(t, s.src, "one", func(x *corev1.Secret) { x.Data["k"] = []byte("v2") })
	for _, ns := range targets {
		eventually(t, converge, "updated in "+ns, secretIn(ns, "one", map[string][]byte{"k": []byte("v2")}))
	}
	time.Sleep(time.Second) // give any extra (fighting) write time to show in the count below
	// One update of the source by the test, then one per replica, and one of
	// the protected source's backup.
	if got, want := apiserverWrites(t, "secrets")-before, float64(1+len(targets)+1); got != want {
		t.Errorf("secret writes for one source change to %d replicas = %v, want %v", len(targets), got, want)
	}
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_replicator_writes_total{kind="Secret",operation="update"}`: float64(len(targets))})
}

// SPEC (Guard, Detection): a protected source whose restore is refused (an
// admission policy here; a quota or a missing permission alike) gets a
// RestoreFailed Warning on its backup and is retried every 5 s at most, not
// at a backoff grown towards a minute: once the refusal ends it is back
// within seconds, however long the refusal lasted.
func TestARefusedRestoreFollowsSoonAfterTheRefusalEnds(t *testing.T) {
	s := setupReplication(t)
	createSecret(t, s.src, "kept", withLabel(keyProtect, "true"), withData("k", "v"))
	eventually(t, converge, "the guard backed up the protected source", func(ctx context.Context) (bool, error) {
		_, err := getSecret(ctx, s.src, "courier-backup.kept")
		return err == nil, nil
	})
	lift := refuse(t, "no-kept-"+s.id, s.src, admissionv1.Create, admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"secrets"}},
		"object.metadata.name != 'kept'", "no Secret named kept here for now", func(ctx context.Context) error {
			_, err := admin().CoreV1().Secrets(s.src).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept"}},
				metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if apierrors.IsAlreadyExists(err) {
				return nil // admitted: the name is taken, not refused
			}
			return err
		})
	deleteSecret(t, s.src, "kept")
	// Refused for 30 s: a backoff doubling from 100 ms without a low cap
	// would have its next try about 20 s after the refusal ends.
	consistently(t, 30*time.Second, "the restore stays refused", func(ctx context.Context) (bool, error) {
		_, err := getSecret(ctx, s.src, "kept")
		return apierrors.IsNotFound(err), nil
	})
	eventually(t, converge, "a RestoreFailed Warning on the backup, with the API server's answer",
		eventWith(s.src, "courier-backup.kept", "RestoreFailed", "no Secret named kept here for now", "retries every 5 s"))
	lift()
	lifted := time.Now()
	eventually(t, 30*time.Second, "restored once the refusal ended", secretIn(s.src, "kept", map[string][]byte{"k": []byte("v")}))
	if took := time.Since(lifted); took > 7*time.Second {
		t.Errorf("restored %s after the refusal ended; want within 7 s (retries every 5 s)", took.Round(100*time.Millisecond))
	}
}

// SPEC (Guard): what others add to a replica's metadata and courier does
// not own — a finalizer, an owner reference, a label — is kept by courier's
// updates and reverts (an update writes the whole object: they were
// dropped before).
func TestAReplicaKeepsTheFinalizersAndOwnersOthersGaveIt(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "cfg", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "1"))
	eventually(t, converge, "replica", secretIn(dst, "cfg", map[string][]byte{"k": []byte("1")}))
	createConfigMap(t, dst, "parent", nil, map[string]string{"x": "y"})
	parent, err := admin().CoreV1().ConfigMaps(dst).Get(t.Context(), "parent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const finalizer = "example.com/hold"
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "parent", UID: parent.UID}
	updateSecret(t, dst, "cfg", func(r *corev1.Secret) {
		r.Finalizers = append(r.Finalizers, finalizer)
		r.OwnerReferences = append(r.OwnerReferences, owner)
		r.Labels["team"] = "a"
	})
	t.Cleanup(func() { // else the namespace never goes (t.Context() has ended)
		ctx := context.Background()
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			r, err := getSecret(ctx, dst, "cfg")
			if err != nil {
				return err
			}
			r.Finalizers = nil
			_, err = admin().CoreV1().Secrets(dst).Update(ctx, r, metav1.UpdateOptions{})
			return err
		})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("remove the test's finalizer: %v", err)
		}
	})
	kept := func(value string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			r, err := getSecret(ctx, dst, "cfg")
			if err != nil || string(r.Data["k"]) != value {
				return false, err
			}
			if !slices.Contains(r.Finalizers, finalizer) || len(r.OwnerReferences) != 1 || r.OwnerReferences[0].UID != parent.UID || r.Labels["team"] != "a" {
				return false, fmt.Errorf("the replica's finalizers %v, owners %v, labels %v: another's were dropped", r.Finalizers, r.OwnerReferences, r.Labels)
			}
			return true, nil
		}
	}
	updateSecret(t, s.src, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("2") })
	withinSpec(t, "the source's change on the replica, its finalizer and owner kept", kept("2"))
	updateSecret(t, dst, "cfg", func(r *corev1.Secret) { r.Data["k"] = []byte("hacked") })
	withinSpec(t, "the edit reverted, the finalizer and owner kept", kept("2"))
}
