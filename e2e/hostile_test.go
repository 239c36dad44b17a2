package e2e

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestHostileTenants plays mallory, a tenant with the `admin` ClusterRole in
// her own namespaces (one targeted by the platform's source, one not), and
// tries each attack SECURITY.md lists. courier runs as its ServiceAccount
// with the RBAC of manifests/.
func TestHostileTenants(t *testing.T) {
	s := setupReplication(t)
	tenant := s.target(t, "tenant", nil)      // the platform's sources target it
	untargeted := newNamespace(t, "own", nil) // also mallory's; no source targets it
	other := s.target(t, "other", nil)        // someone else's
	for _, ns := range []string{tenant, untargeted} {
		bindRole(t, ns, "mallory", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"})
	}
	mallory := clientFor(t, env.cluster.Impersonating("mallory")).CoreV1()
	create := func(t *testing.T, ns string, s *corev1.Secret) *corev1.Secret {
		t.Helper()
		var got *corev1.Secret
		eventually(t, converge, "mallory creates "+ns+"/"+s.Name, func(ctx context.Context) (bool, error) {
			var err error
			got, err = mallory.Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
			return err == nil, err // RBAC bindings take a moment to apply
		})
		return got
	}

	// The platform's source, targeting tenant and other; mallory squats its
	// name in tenant first.
	squat := create(t, tenant, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string][]byte{"mine": []byte("keep")}})
	createSecret(t, s.src, "db", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReload, "true"), withData("password", "s3cret"))
	eventually(t, converge, "replica in "+other, secretIn(other, "db", map[string][]byte{"password": []byte("s3cret")}))

	t.Run("source in own namespace", func(t *testing.T) {
		create(t, tenant, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "leak", Annotations: map[string]string{keyReplicateTo: "*"}},
			Data: map[string][]byte{"k": []byte("v")}})
		eventually(t, converge, "SourceNotAllowed on mallory's Secret", eventWith(tenant, "leak", "SourceNotAllowed"))
		consistently(t, 2*time.Second, "nothing replicated", func(ctx context.Context) (bool, error) {
			for _, ns := range []string{other, untargeted, s.src} {
				if _, err := getSecret(ctx, ns, "leak"); !apierrors.IsNotFound(err) {
					return false, err
				}
			}
			return true, nil
		})
	})

	t.Run("squatted replica name", func(t *testing.T) {
		eventually(t, converge, "ReplicaConflict on the source naming "+tenant, eventWith(s.src, "db", "ReplicaConflict", tenant))
		consistently(t, 2*time.Second, "mallory's object untouched", func(ctx context.Context) (bool, error) {
			got, err := getSecret(ctx, tenant, "db")
			return err == nil && got.ResourceVersion == squat.ResourceVersion && string(got.Data["mine"]) == "keep" && len(got.Data) == 1, err
		})
	})

	t.Run("forged replica markers", func(t *testing.T) {
		create(t, untargeted, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db",
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "courier", "courier.dev/replica": "true"},
			Annotations: map[string]string{"courier.dev/source": s.src + "/db"}},
			Data: map[string][]byte{"mine": []byte("forged")}})
		consistently(t, 2*time.Second, "the forged replica never receives the source's content", func(ctx context.Context) (bool, error) {
			got, err := getSecret(ctx, untargeted, "db")
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return err == nil && got.Data["password"] == nil, err
		})
		eventually(t, converge, "the forged replica, in a namespace no source targets, is deleted", secretGone(untargeted, "db"))
	})

	t.Run("reload-on another namespace", func(t *testing.T) {
		createSecret(t, tenant, "local", withData("k", "1"))
		createDeployment(t, tenant, "app", map[string]string{"courier.dev/reload-on": "secret/" + s.src + "/db, secret/local"},
			podSpec([]corev1.EnvVar{keyRef("secret", "local", "k")}, nil, nil))
		eventually(t, converge, "InvalidAnnotation on mallory's Deployment", eventWith(tenant, "app", "InvalidAnnotation", s.src+"/db"))
		before := settled(t, tenant, "app")
		updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Data["password"] = []byte("rotated") })
		eventually(t, converge, "replica in "+other+" updated", secretIn(other, "db", map[string][]byte{"password": []byte("rotated")}))
		noRollout(t, tenant, "app", before)
	})

	t.Run("service-account token", func(t *testing.T) {
		_, err := mallory.Secrets(s.src).Create(t.Context(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "sa-token", Annotations: map[string]string{keyReplicateTo: "*", corev1.ServiceAccountNameKey: "default"}},
			Type:       corev1.SecretTypeServiceAccountToken,
		}, metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Errorf("mallory could create a Secret in the source namespace: %v", err)
		}
		create(t, tenant, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sa-token",
			Annotations: map[string]string{keyReplicateTo: "*", corev1.ServiceAccountNameKey: "default"}},
			Type: corev1.SecretTypeServiceAccountToken})
		consistently(t, 2*time.Second, "her token is copied nowhere", func(ctx context.Context) (bool, error) {
			_, err := getSecret(ctx, other, "sa-token")
			return apierrors.IsNotFound(err), nil
		})
	})

	t.Run("edit and delete a replica", func(t *testing.T) {
		bindRole(t, other, "mallory", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"})
		want := map[string][]byte{"password": []byte("rotated")}
		eventually(t, converge, "mallory edits the replica", func(ctx context.Context) (bool, error) {
			r, err := mallory.Secrets(other).Get(ctx, "db", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			r.Data["password"] = []byte("mallory-was-here")
			_, err = mallory.Secrets(other).Update(ctx, r, metav1.UpdateOptions{})
			return err == nil, err
		})
		eventually(t, converge, "edit reverted", secretIn(other, "db", want))
		if err := mallory.Secrets(other).Delete(t.Context(), "db", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, converge, "deleted replica recreated", secretIn(other, "db", want))

		installGuardPolicy(t)
		eventually(t, 10*time.Second, "with the guard policy, mallory's delete is denied", func(ctx context.Context) (bool, error) {
			err := mallory.Secrets(other).Delete(ctx, "db", metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
			return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
		})
	})
}
