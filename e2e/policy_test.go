package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// installGuardPolicy creates manifests/guard-policy.yaml's policy and binding
// and removes them when the test ends.
func installGuardPolicy(t *testing.T) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(env.root, "manifests", "guard-policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var policy admissionv1.ValidatingAdmissionPolicy
	var binding admissionv1.ValidatingAdmissionPolicyBinding
	if err := dec.Decode(&policy); err != nil {
		t.Fatalf("decode policy: %v", err)
	}
	if err := dec.Decode(&binding); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("decode binding: %v", err)
	}
	ar := admin().AdmissionregistrationV1()
	if _, err := ar.ValidatingAdmissionPolicies().Create(t.Context(), &policy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create policy: %v", err)
	}
	t.Cleanup(func() {
		_ = ar.ValidatingAdmissionPolicyBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = ar.ValidatingAdmissionPolicies().Delete(context.Background(), policy.Name, metav1.DeleteOptions{})
	})
	if _, err := ar.ValidatingAdmissionPolicyBindings().Create(t.Context(), &binding, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create binding: %v", err)
	}
	// The policy must compile without type-checking warnings.
	eventually(t, converge, "policy type-checked", func(ctx context.Context) (bool, error) {
		p, err := ar.ValidatingAdmissionPolicies().Get(ctx, policy.Name, metav1.GetOptions{})
		if err != nil || p.Status.TypeChecking == nil {
			return false, err
		}
		if w := p.Status.TypeChecking.ExpressionWarnings; len(w) > 0 {
			t.Fatalf("policy type-checking warnings: %+v", w)
		}
		return true, nil
	})
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func bindRole(t *testing.T, ns, user string, role rbacv1.RoleRef) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-", Namespace: ns},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user, APIGroup: rbacv1.GroupName}},
		RoleRef:    role,
	}
	if _, err := admin().RbacV1().RoleBindings(ns).Create(t.Context(), rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

var editRole = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"}

// tryWrite updates (a label) or deletes ns/name as c and returns the error.
func tryWrite(ctx context.Context, c kubernetes.Interface, op, ns, name string) error {
	if op == "delete" {
		return c.CoreV1().Secrets(ns).Delete(ctx, name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	}
	s, err := c.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	s.Labels["touched"] = time.Now().Format("150405.000000")
	_, err = c.CoreV1().Secrets(ns).Update(ctx, s, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

func TestGuardPolicyDeniesUnauthorisedChangesInTheAPIServer(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "guarded", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	createSecret(t, dst, "plain", withData("k", "v"))
	eventually(t, converge, "replica", secretIn(dst, "guarded", map[string][]byte{"k": []byte("v")}))
	installGuardPolicy(t)

	alice := clientFor(t, env.cluster.Impersonating("alice"))
	for _, ns := range []string{s.src, dst} {
		bindRole(t, ns, "alice", editRole)
	}
	objects := []struct{ what, ns string }{{"protected source", s.src}, {"replica", dst}}
	for _, o := range objects {
		for _, op := range []string{"update", "delete"} {
			eventually(t, 10*time.Second, "alice denied "+op+" of the "+o.what, func(ctx context.Context) (bool, error) {
				err := tryWrite(ctx, alice, op, o.ns, "guarded")
				if err == nil {
					return false, nil // the policy may take a moment to load
				}
				if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
					return false, err
				}
				msg := err.Error()
				for _, want := range []string{o.ns + "/guarded", `"override"`} {
					if !strings.Contains(msg, want) {
						t.Fatalf("denial message %q lacks %q", msg, want)
					}
				}
				t.Logf("%s %s as alice: %s", op, o.what, msg)
				return true, nil
			})
		}
	}
	if err := tryWrite(t.Context(), alice, "update", dst, "plain"); err != nil {
		t.Errorf("alice may not update an unguarded Secret: %v", err)
	}

	// The verb "override" on the named Secret delegates the right.
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "override-guarded", Namespace: dst},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"guarded"}, Verbs: []string{"override"}}},
	}
	if _, err := admin().RbacV1().Roles(dst).Create(t.Context(), role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindRole(t, dst, "alice", rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name})
	eventually(t, converge, "alice with override may update and delete the replica", func(ctx context.Context) (bool, error) {
		return tryWrite(ctx, alice, "update", dst, "guarded") == nil && tryWrite(ctx, alice, "delete", dst, "guarded") == nil, nil
	})
	if err := tryWrite(t.Context(), alice, "update", s.src, "guarded"); err == nil {
		t.Errorf("override in %s leaked to the source in %s", dst, s.src)
	}

	for _, op := range []string{"update", "delete"} {
		if err := tryWrite(t.Context(), admin(), op, s.src, "guarded"); err != nil {
			t.Errorf("cluster-admin %s of the protected source: %v", op, err)
		}
	}

	// courier's ServiceAccount passes the policy (its RBAC comes from manifests/).
	courierSA := clientFor(t, env.cluster.AsServiceAccount("courier-system", "courier"))
	bindRole(t, dst, "system:serviceaccount:courier-system:courier", editRole)
	eventually(t, converge, "courier's ServiceAccount may update the replica", func(ctx context.Context) (bool, error) {
		return tryWrite(ctx, courierSA, "update", dst, "guarded") == nil, nil
	})

	// Namespace teardown still works.
	if err := admin().CoreV1().Namespaces().Delete(t.Context(), dst, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "namespace holding a replica deleted", func(ctx context.Context) (bool, error) {
		n, err := admin().CoreV1().Namespaces().Get(ctx, dst, metav1.GetOptions{})
		if err == nil {
			return false, fmt.Errorf("still there: %+v", n.Status.Conditions)
		}
		return apierrors.IsNotFound(err), nil
	})
}
