package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/courier-k8s/courier/e2e/cluster"
)

// installNamespace is where manifests/ install courier.
const installNamespace = "courier-system"

// kubectl runs the control plane's kubectl as admin in the repository root.
func kubectl(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(env.binDir, "kubectl"), append([]string{"--kubeconfig=" + env.cluster.Kubeconfig}, args...)...)
	cmd.Dir = env.root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("kubectl %v: %w: %s", args, err, stderr.String())
	}
	return out, nil
}

// renderManifests is `kubectl kustomize dir` decoded: typed objects for the
// kinds client-go knows, unstructured ones for the rest (Prometheus Operator).
func renderManifests(ctx context.Context, dir string) ([]runtime.Object, error) {
	raw, err := kubectl(ctx, "kustomize", dir)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var objs []runtime.Object
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			return objs, nil
		} else if err != nil {
			return nil, fmt.Errorf("decode %s: %w", dir, err)
		}
		typed, err := scheme.Scheme.New(u.GroupVersionKind())
		if err != nil {
			objs = append(objs, &u)
			continue
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			return nil, fmt.Errorf("convert %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		objs = append(objs, typed)
	}
}

// manifestRBAC is the RBAC manifests/ give courier.
type manifestRBAC struct {
	cluster []rbacv1.PolicyRule // ClusterRole courier
	leader  []rbacv1.PolicyRule // Role courier-leader, in courier's namespace
}

func rbacFrom(objs []runtime.Object) (manifestRBAC, error) {
	var r manifestRBAC
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			if o.Name == "courier" { // not courier-override, which is for others
				r.cluster = o.Rules
			}
		case *rbacv1.Role:
			r.leader = o.Rules
		}
	}
	if r.cluster == nil || r.leader == nil {
		return r, errors.New("manifests/ lack the ClusterRole or the leader Role")
	}
	return r, nil
}

// identity is who a courier process runs as: a ServiceAccount in
// courier-system (or namespace) bound to a ClusterRole of the same name with
// rules.cluster, and, in the courier's own namespace, to a Role with
// rules.leader.
type identity struct {
	sa        string
	rules     manifestRBAC
	namespace string // "": installNamespace
}

func (id identity) ns() string {
	if id.namespace == "" {
		return installNamespace
	}
	return id.namespace
}

// courierIdentity is courier's ServiceAccount with exactly the RBAC of
// manifests/; every courier a test starts runs as it unless it says otherwise.
func courierIdentity() identity { return identity{sa: "courier", rules: env.rbac} }

func (id identity) user() string { return cluster.ServiceAccountUser(id.ns(), id.sa) }

// impersonation is what a kubeconfig for id sets: the user and the groups
// the API server gives a ServiceAccount.
func (id identity) impersonation() rest.ImpersonationConfig {
	return rest.ImpersonationConfig{
		UserName: id.user(),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + id.ns(), "system:authenticated"},
	}
}

func (id identity) subjects() []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: id.sa, Namespace: id.ns()}}
}

// grantCluster creates or replaces id's ClusterRole and ClusterRoleBinding.
func (id identity) grantCluster(ctx context.Context) error {
	rbac := admin().RbacV1()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: id.sa}, Rules: id.rules.cluster}
	if err := upsert(ctx, role, rbac.ClusterRoles().Create, rbac.ClusterRoles().Update); err != nil {
		return err
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: id.sa},
		Subjects:   id.subjects(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: id.sa},
	}
	return upsert(ctx, binding, rbac.ClusterRoleBindings().Create, rbac.ClusterRoleBindings().Update)
}

// revokeCluster deletes id's ClusterRole and ClusterRoleBinding.
func (id identity) revokeCluster(ctx context.Context) {
	_ = admin().RbacV1().ClusterRoleBindings().Delete(ctx, id.sa, metav1.DeleteOptions{})
	_ = admin().RbacV1().ClusterRoles().Delete(ctx, id.sa, metav1.DeleteOptions{})
}

// restoreSuiteRBAC grants the suite's courier identity its ClusterRole
// again, for a test whose install replaced or removed it (ClusterRole
// courier, which every other test's courier runs with).
func restoreSuiteRBAC(t *testing.T) {
	if err := courierIdentity().grantCluster(context.Background()); err != nil {
		t.Errorf("restore courier's RBAC: %v", err)
	}
}

// grantLeader creates id's leader Role and RoleBinding in ns (courier's
// own namespace, where its Lease lives); nothing for an identity without
// leader rules (one whose RBAC the test installs another way).
func (id identity) grantLeader(ctx context.Context, ns string) error {
	if len(id.rules.leader) == 0 {
		return nil // its RBAC comes from elsewhere, e.g. the Helm chart
	}
	rbac := admin().RbacV1()
	name := "courier-leader-" + id.sa
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Rules: id.rules.leader}
	if err := upsert(ctx, role, rbac.Roles(ns).Create, rbac.Roles(ns).Update); err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Subjects:   id.subjects(),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
	}
	return upsert(ctx, binding, rbac.RoleBindings(ns).Create, rbac.RoleBindings(ns).Update)
}

// upsert creates obj, or updates it when it exists.
func upsert[T metav1.Object](ctx context.Context, obj T,
	create func(context.Context, T, metav1.CreateOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error)) error {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("create or update %T %s: %w", obj, obj.GetName(), err)
	}
	return nil
}

// writeKubeconfig writes a kubeconfig acting as id into the test's temp dir.
func writeKubeconfig(t *testing.T, id identity) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig-"+id.sa)
	if err := env.cluster.WriteKubeconfig(path, id.impersonation()); err != nil {
		t.Fatal(err)
	}
	return path
}
