package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/courier-k8s/courier/e2e/cluster"
	"github.com/courier-k8s/courier/internal/status"
)

const (
	keyReplicateToClusters = "courier.dev/replicate-to-clusters"
	keySourceCluster       = "courier.dev/source-cluster"
	keyCluster             = "courier.dev/cluster"
)

// remoteCluster is a second control plane (etcd and kube-apiserver only)
// that a test's courier replicates into, with the identity of
// manifests/remote-cluster.
type remoteCluster struct {
	c     *cluster.Cluster
	rules []rbacv1.PolicyRule // ClusterRole courier-remote
}

// startRemote starts a cluster for t alone and applies
// manifests/remote-cluster there (its token Secret aside: no token
// controller runs; the kubeconfig impersonates the ServiceAccount instead).
func startRemote(t *testing.T) *remoteCluster {
	t.Helper()
	c, err := cluster.Start(t.Context(), cluster.Options{BinDir: env.binDir, APIServerOnly: true})
	if err != nil {
		t.Fatalf("start a second control plane: %v", err)
	}
	t.Cleanup(c.Stop)
	objs, err := renderManifests(t.Context(), "manifests/remote-cluster")
	if err != nil {
		t.Fatal(err)
	}
	r := &remoteCluster{c: c}
	ctx := t.Context()
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Namespace:
			_, err = c.Client.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = c.Client.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			r.rules = o.Rules
			_, err = c.Client.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.Client.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			continue
		default:
			t.Fatalf("manifests/remote-cluster holds a %T: apply it here too", o)
		}
		if err != nil {
			t.Fatalf("apply manifests/remote-cluster: %v", err)
		}
	}
	if r.rules == nil {
		t.Fatal("manifests/remote-cluster has no ClusterRole")
	}
	return r
}

func (r *remoteCluster) client() kubernetes.Interface { return r.c.Client }

// kubeconfig is a kubeconfig that acts in the cluster as courier-remote.
func (r *remoteCluster) kubeconfig(t *testing.T) []byte {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["remote"] = &clientcmdapi.Cluster{Server: r.c.Config.Host, InsecureSkipTLSVerify: true}
	cfg.AuthInfos["courier"] = &clientcmdapi.AuthInfo{Token: r.c.Config.BearerToken,
		Impersonate: cluster.ServiceAccountUser("courier-remote", "courier-remote"), ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:courier-remote"}}
	cfg.Contexts["remote"] = &clientcmdapi.Context{Cluster: "remote", AuthInfo: "courier"}
	cfg.CurrentContext = "remote"
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The token must never show in a log line or an Event.
	recordValues(map[string][]byte{"token": []byte(r.c.Config.BearerToken), "kubeconfig": b})
	return b
}

// namespace creates a namespace in the cluster with labels.
func (r *remoteCluster) namespace(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	got, err := r.client().CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-", Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Name
}

func (r *remoteCluster) secretIn(ns, name string, want map[string][]byte) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		s, err := r.client().CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && equalData(s.Data, want), err
	}
}

func (r *remoteCluster) secretGone(ns, name string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		_, err := r.client().CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}
}

// addCluster creates the cluster Secret of r, named name, in courier's
// namespace, with labels.
func addCluster(t *testing.T, p *courierProcess, r *remoteCluster, name string, labels map[string]string) string {
	t.Helper()
	opts := []secretOpt{withLabel(keyCluster, name)}
	for k, v := range labels {
		opts = append(opts, withLabel(k, v))
	}
	s := createSecret(t, p.namespace, "cluster-"+name, opts...)
	updateSecret(t, p.namespace, s.Name, func(s *corev1.Secret) { s.Data = map[string][]byte{"kubeconfig": r.kubeconfig(t)} })
	return s.Name
}

// TestReplicatesIntoAnotherCluster is issue #53's "one annotation": a
// source's replicas reach the namespaces its replicate-to selects in each
// cluster its replicate-to-clusters selects, with every promise a replica
// keeps in its own cluster.
func TestReplicatesIntoAnotherCluster(t *testing.T) {
	r := startRemote(t)
	s := setupReplication(t, "--cluster-name=hub-e2e")
	sel := "env=prod,test=" + s.id
	prod := r.namespace(t, "prod", map[string]string{"env": "prod", "test": s.id})
	dev := r.namespace(t, "dev", map[string]string{"env": "dev", "test": s.id})
	local := s.target(t, "local", map[string]string{"env": "prod"})
	addCluster(t, s.courier, r, "east", map[string]string{"env": "prod"})
	eventually(t, converge, "the cluster is reachable", func(ctx context.Context) (bool, error) {
		v, ok := s.courier.MetricValue(ctx, `courier_cluster_reachable{cluster="east"}`)
		return ok && v == 1, nil
	})

	createSecret(t, s.src, "app", withAnnotation(keyReplicateTo, sel), withAnnotation(keyReplicateToClusters, "env=prod"), withData("v", "value-1"))
	v1 := map[string][]byte{"v": []byte("value-1")}
	withinSpec(t, "replica in this cluster", secretIn(local, "app", v1))
	withinSpec(t, "replica in the other cluster's matching namespace", r.secretIn(prod, "app", v1))
	got, err := r.client().CoreV1().Secrets(prod).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Annotations[keySource] != s.src+"/app" || got.Annotations[keySourceCluster] != "hub-e2e" || got.Labels[keyReplica] != "true" {
		t.Errorf("the remote replica names its source %q in cluster %q (label %q), want %s/app in hub-e2e", got.Annotations[keySource], got.Annotations[keySourceCluster], got.Labels[keyReplica], s.src)
	}
	consistently(t, quiet, "nothing in the namespace its selector does not match", r.secretGone(dev, "app"))

	updateSecret(t, s.src, "app", func(x *corev1.Secret) { x.Data["v"] = []byte("value-2") })
	v2 := map[string][]byte{"v": []byte("value-2")}
	withinSpec(t, "a source change reaches the other cluster", r.secretIn(prod, "app", v2))

	edit := func(ctx context.Context) error {
		x, err := r.client().CoreV1().Secrets(prod).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return err
		}
		x.Data["v"] = []byte("edited-by-hand")
		_, err = r.client().CoreV1().Secrets(prod).Update(ctx, x, metav1.UpdateOptions{})
		return err
	}
	updateOnConflict(t, "edit the remote replica", edit)
	withinSpec(t, "an edit there is reverted", r.secretIn(prod, "app", v2))
	eventually(t, converge, "the revert is told on the source", eventWith(s.src, "app", "ReplicaReverted", "cluster east"))

	if err := r.client().CoreV1().Secrets(prod).Delete(t.Context(), "app", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	withinSpec(t, "a deletion there is restored", r.secretIn(prod, "app", v2))

	// Stripped of the label courier's cache there selects on, it is found
	// by name and made whole again.
	updateOnConflict(t, "strip the replica label", func(ctx context.Context) error {
		x, err := r.client().CoreV1().Secrets(prod).Get(ctx, "app", metav1.GetOptions{})
		if err != nil {
			return err
		}
		delete(x.Labels, keyReplica)
		_, err = r.client().CoreV1().Secrets(prod).Update(ctx, x, metav1.UpdateOptions{})
		return err
	})
	withinSpec(t, "a stripped replica gets its label back", func(ctx context.Context) (bool, error) {
		x, err := r.client().CoreV1().Secrets(prod).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && x.Labels[keyReplica] == "true", err
	})

	later := r.namespace(t, "later", map[string]string{"env": "prod", "test": s.id})
	withinSpec(t, "a new matching namespace there gets a replica", r.secretIn(later, "app", v2))

	// An object courier did not create is never overwritten.
	taken := r.namespace(t, "taken", map[string]string{"test": s.id})
	if _, err := r.client().CoreV1().Secrets(taken).Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: taken},
		Data: map[string][]byte{"v": []byte("theirs")}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setRemoteLabels(t, r, taken, map[string]string{"env": "prod", "test": s.id})
	eventually(t, converge, "the taken name is told on the source", eventWith(s.src, "app", "ReplicaConflict", taken+" in cluster east"))
	consistently(t, quiet, "their object is untouched", r.secretIn(taken, "app", map[string][]byte{"v": []byte("theirs")}))

	// The cluster's selection goes: its replicas go; it comes back: so do they.
	updateSecret(t, s.courier.namespace, "cluster-east", func(x *corev1.Secret) { x.Labels["env"] = "staging" })
	withinSpec(t, "cluster deselected: its replicas deleted", allOf(r.secretGone(prod, "app"), r.secretGone(later, "app")))
	consistently(t, quiet, "the replica in this cluster stays", secretIn(local, "app", v2))
	consistently(t, quiet, "their object is still untouched", r.secretIn(taken, "app", map[string][]byte{"v": []byte("theirs")}))
	updateSecret(t, s.courier.namespace, "cluster-east", func(x *corev1.Secret) { x.Labels["env"] = "prod" })
	withinSpec(t, "cluster selected again: replicas again", r.secretIn(prod, "app", v2))

	updateSecret(t, s.src, "app", func(x *corev1.Secret) { delete(x.Annotations, keyReplicateToClusters) })
	withinSpec(t, "annotation removed: the other cluster's replicas deleted", allOf(r.secretGone(prod, "app"), r.secretGone(later, "app")))
	consistently(t, quiet, "the replica in this cluster stays", secretIn(local, "app", v2))
	updateSecret(t, s.src, "app", func(x *corev1.Secret) { x.Annotations[keyReplicateToClusters] = "*" })
	withinSpec(t, "annotation back (every cluster): replicas again", r.secretIn(later, "app", v2))

	deleteSecret(t, s.src, "app")
	withinSpec(t, "source deleted: every replica deleted", allOf(r.secretGone(prod, "app"), r.secretGone(later, "app"), secretGone(local, "app")))
	consistently(t, quiet, "their object outlives it", r.secretIn(taken, "app", map[string][]byte{"v": []byte("theirs")}))
	if leaked := leaks(s.courier.Logs()); len(leaked) > 0 {
		t.Errorf("courier's log holds a value it must never show: %d of them", len(leaked))
	}
}

func setRemoteLabels(t *testing.T, r *remoteCluster, ns string, labels map[string]string) {
	t.Helper()
	updateOnConflict(t, "label namespace "+ns, func(ctx context.Context) error {
		n, err := r.client().CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Labels = labels
		_, err = r.client().CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// TestAnUnreachableClusterLosesNothing: a cluster whose API server stops is
// reported and retried; nothing is deleted there or here meanwhile, and
// what changed is written there once when it is back.
func TestAnUnreachableClusterLosesNothing(t *testing.T) {
	r := startRemote(t)
	s := setupReplication(t)
	prod := r.namespace(t, "prod", map[string]string{"test": s.id})
	local := s.target(t, "local", nil)
	addCluster(t, s.courier, r, "west", nil)
	createSecret(t, s.src, "db", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReplicateToClusters, "*"), withData("v", "value-1"))
	withinSpec(t, "replica there", r.secretIn(prod, "db", map[string][]byte{"v": []byte("value-1")}))
	writes := `courier_replicator_cluster_writes_total{cluster="west",kind="Secret",operation="update"}`
	before, _ := s.courier.MetricValue(t.Context(), writes)

	clusterStatus(t, s, "west", func(c status.RemoteCluster) bool {
		return c.Reachable && c.InSync == 1 && c.Total == 1 && c.Error == ""
	})
	if err := r.c.Pause("kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the cluster is reported unreachable", eventWith(s.courier.namespace, "cluster-west", "ClusterUnreachable", "cluster west cannot be reached"))
	if v, ok := s.courier.MetricValue(t.Context(), `courier_cluster_reachable{cluster="west"}`); !ok || v != 0 {
		t.Errorf("courier_cluster_reachable{cluster=\"west\"} = %v (found %v), want 0", v, ok)
	}
	clusterStatus(t, s, "west", func(c status.RemoteCluster) bool { return !c.Reachable && strings.HasPrefix(c.Error, "unreachable: ") })
	updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Data["v"] = []byte("value-2") })
	v2 := map[string][]byte{"v": []byte("value-2")}
	withinSpec(t, "this cluster's replica is not held up", secretIn(local, "db", v2))
	updateSecret(t, s.src, "db", func(x *corev1.Secret) { x.Data["v"] = []byte("value-3") })
	v3 := map[string][]byte{"v": []byte("value-3")}
	withinSpec(t, "nor its next change", secretIn(local, "db", v3))

	if err := r.c.Resume("kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the newest content is written there once it is back", r.secretIn(prod, "db", v3))
	eventually(t, converge, "its return is told", eventWith(s.courier.namespace, "cluster-west", "ClusterReachable"))
	consistently(t, quiet, "and stays", r.secretIn(prod, "db", v3))
	after, _ := s.courier.MetricValue(t.Context(), writes)
	if after-before != 1 {
		t.Errorf("courier updated the replica there %v times after the outage, want once (the newest content)", after-before)
	}
	noValuesInEvents(t, s.courier.namespace)
}

// TestClusterSecretProblemsAreToldAndHoldNothingUp: a cluster Secret that
// cannot be used is told on it, without a value, and other clusters are
// not held up; a kubeconfig that would have courier run a command or read
// a file is refused.
func TestClusterSecretProblemsAreToldAndHoldNothingUp(t *testing.T) {
	r := startRemote(t)
	s := setupReplication(t, "--compat=replicator")
	prod := r.namespace(t, "prod", map[string]string{"test": s.id})
	for name, kubeconfig := range map[string]string{
		"garbled":   "apiVersion: v1\nkind: Config\nclusters: [{{not yaml: s3cr3t-token-value",
		"exec":      "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: x, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, args: ['-c', 'touch /tmp/courier-ran-it']}}}]\n",
		"tokenfile": "apiVersion: v1\nkind: Config\ncurrent-context: x\ncontexts: [{name: x, context: {cluster: x, user: x}}]\nclusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: x, user: {tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token}}]\n",
	} {
		createSecret(t, s.courier.namespace, "cluster-"+name, withLabel(keyCluster, name), withData("kubeconfig", kubeconfig))
	}
	createSecret(t, s.courier.namespace, "cluster-bad-name", withLabel(keyCluster, "Not_A_Name"), withData("kubeconfig", string(r.kubeconfig(t))))
	addCluster(t, s.courier, r, "good", nil)
	// A newer Secret giving the same name (or one created in the same
	// second, whose namespace/name sorts after): told, and ignored.
	createSecret(t, s.courier.namespace, "cluster-good-copy", withLabel(keyCluster, "good"), withData("kubeconfig", string(r.kubeconfig(t))))
	createSecret(t, s.src, "app", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReplicateToClusters, "*"), withData("v", "value-1"))
	withinSpec(t, "the good cluster gets its replica", r.secretIn(prod, "app", map[string][]byte{"v": []byte("value-1")}))
	for name, says := range map[string]string{
		"garbled":   "does not parse as a kubeconfig",
		"exec":      "exec credential plugin",
		"tokenfile": "names a file",
		"bad-name":  "not a valid cluster name",
		"good-copy": `cluster name "good" is already given by the cluster Secret ` + s.courier.namespace + "/cluster-good",
	} {
		eventually(t, converge, "cluster-"+name+" is told", eventWith(s.courier.namespace, "cluster-"+name, "ClusterInvalid", says))
	}
	// Only a source courier acts on, through its own replicate-to, reaches
	// another cluster: not one outside --source-namespaces, not one made by
	// another tool's annotation (--compat).
	elsewhere := newNamespace(t, "not-allowed", nil)
	createSecret(t, elsewhere, "app", withAnnotation(keyReplicateTo, "test="+s.id), withAnnotation(keyReplicateToClusters, "*"), withData("v", "value-1"))
	createSecret(t, s.src, "compat", withAnnotation("replicator.v1.mittwald.de/replicate-to", "compat-target-"+s.id), withAnnotation(keyReplicateToClusters, "*"), withData("v", "value-1"))
	eventually(t, converge, "a compat source is told it does not cross clusters", eventWith(s.src, "compat", "InvalidAnnotation", keyReplicateToClusters+" needs "+keyReplicateTo))
	consistently(t, quiet, "neither reaches the other cluster", func(ctx context.Context) (bool, error) {
		l, err := r.client().CoreV1().Secrets("").List(ctx, metav1.ListOptions{LabelSelector: keyReplica + "=true"})
		if err != nil {
			return false, err
		}
		for _, x := range l.Items {
			if x.Name == "compat" || x.Annotations[keySource] == elsewhere+"/app" {
				return false, nil
			}
		}
		return true, nil
	})
	if strings.Contains(s.courier.Logs(), "s3cr3t-token-value") {
		t.Error("courier's log quotes the garbled kubeconfig")
	}
	events, err := admin().CoreV1().Events(s.courier.namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, "s3cr3t-token-value") {
			t.Errorf("Event %s quotes the garbled kubeconfig: %s", e.Reason, e.Message)
		}
	}

	// Fixed, it is used. It reaches the same cluster as "good" does: the
	// two never undo each other's replicas, and the one that finds the name
	// taken by the other's says so.
	fixed := r.namespace(t, "fixed", map[string]string{"test": s.id})
	withinSpec(t, "the good cluster's replica in a new namespace", r.secretIn(fixed, "app", map[string][]byte{"v": []byte("value-1")}))
	updateSecret(t, s.courier.namespace, "cluster-garbled", func(x *corev1.Secret) {
		x.Labels[keyCluster] = "garbled-fixed"
		x.Data["kubeconfig"] = r.kubeconfig(t)
	})
	eventually(t, converge, "a fixed cluster Secret is used", func(ctx context.Context) (bool, error) {
		v, ok := s.courier.MetricValue(ctx, `courier_cluster_reachable{cluster="garbled-fixed"}`)
		return ok && v == 1, nil
	})
	eventually(t, converge, "the name taken through the other cluster Secret is told", eventWith(s.src, "app", "ReplicaConflict", "in cluster garbled-fixed"))
	held, err := r.client().CoreV1().Secrets(fixed).Get(t.Context(), "app", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	consistently(t, quiet, "neither undoes the other's replica", func(ctx context.Context) (bool, error) {
		now, err := r.client().CoreV1().Secrets(fixed).Get(ctx, "app", metav1.GetOptions{})
		return err == nil && now.ResourceVersion == held.ResourceVersion, err
	})
	updateSecret(t, s.src, "app", func(x *corev1.Secret) { x.Annotations[keyReplicateToClusters] = keyCluster + "=garbled-fixed" })
	withinSpec(t, "selected alone, the fixed cluster Secret's replicas replace the other's", func(ctx context.Context) (bool, error) {
		now, err := r.client().CoreV1().Secrets(fixed).Get(ctx, "app", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil && now.Annotations["courier.dev/target-cluster"] == "garbled-fixed", err
	})
	noValuesInEvents(t, s.courier.namespace)
}

// TestRemoteClusterRBACIsMinimal runs a probe of everything courier does in
// a cluster it replicates into with the ClusterRole of
// manifests/remote-cluster there (every check passes), then once for each
// permission it grants with only that one removed: each time a check fails
// and courier's log shows the API server refusing exactly that permission.
func TestRemoteClusterRBACIsMinimal(t *testing.T) {
	r := startRemote(t)
	all := permissions(r.rules, false)
	courierNS := newNamespace(t, "courier", nil)
	grant := func(t *testing.T, rules []rbacv1.PolicyRule) {
		t.Helper()
		updateOnConflict(t, "the remote ClusterRole", func(ctx context.Context) error {
			role, err := r.client().RbacV1().ClusterRoles().Get(ctx, "courier-remote", metav1.GetOptions{})
			if err != nil {
				return err
			}
			role.Rules = rules
			_, err = r.client().RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{})
			return err
		})
	}
	createSecret(t, courierNS, "cluster-probe", withLabel(keyCluster, "probe"), withData("kubeconfig", string(r.kubeconfig(t))))
	t.Run("manifests", func(t *testing.T) {
		grant(t, r.rules)
		if failed, log := probeRemote(t, r, courierNS, ""); failed != "" {
			t.Fatalf("with the RBAC of manifests/remote-cluster, check %q failed; courier's log:\n%s", failed, log)
		} else if strings.Contains(log, "is forbidden") {
			t.Fatalf("with the RBAC of manifests/remote-cluster, the API server refused courier something:\n%s", linesWith(log, "is forbidden"))
		}
	})
	if t.Failed() {
		return
	}
	for _, p := range all {
		t.Run("without "+p.String(), func(t *testing.T) {
			grant(t, rulesWithout(all, p))
			var env []string
			if p.verb == "list" {
				env = []string{"KUBE_FEATURE_WatchListClient=false"}
			}
			failed, log := probeRemote(t, r, courierNS, refusal(p), env...)
			if failed == "" {
				t.Errorf("without %s every check passed: the permission is unused", p)
			}
			if !strings.Contains(log, refusal(p)) {
				t.Errorf("without %s courier's log never shows the API server refusing it (%s); the first failed check was %q", p, refusal(p), failed)
			}
			t.Logf("without %s: check %q failed", p, failed)
		})
	}
	grant(t, r.rules)
}

// probeRemote starts courier (installation ns) and checks in turn each
// thing it does in the cluster r: replicas created, updated, a stripped
// one found by name and reverted, removed. It returns the first check that
// failed ("" if none) and courier's log.
func probeRemote(t *testing.T, r *remoteCluster, ns, refused string, env ...string) (failed, log string) {
	t.Helper()
	id := testID()
	src := newNamespace(t, "src", nil)
	dst := r.namespace(t, "dst", map[string]string{"test": id})
	c := startCourierAs(t, courierIdentity(), env, "--namespace="+ns, "--source-namespaces="+src)
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	check := func(what string, cond func(context.Context) (bool, error)) {
		if failed != "" {
			return
		}
		if wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, 4*time.Second, true, cond) != nil {
			failed = what
		}
	}
	cm := func(ctx context.Context, want string) (bool, error) {
		got, err := r.client().CoreV1().ConfigMaps(dst).Get(ctx, "probe", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return want == "", nil
		}
		return err == nil && got.Data["v"] == want && got.Labels[keyReplica] == "true", err
	}
	annotations := map[string]string{keyReplicateTo: "test=" + id, keyReplicateToClusters: "*"}
	createSecret(t, src, "probe", withAnnotation(keyReplicateTo, "test="+id), withAnnotation(keyReplicateToClusters, "*"), withData("v", "one"))
	createConfigMap(t, src, "probe", annotations, map[string]string{"v": "one"})
	check("replicas created there", allOf(r.secretIn(dst, "probe", map[string][]byte{"v": []byte("one")}), func(ctx context.Context) (bool, error) { return cm(ctx, "one") }))
	updateSecret(t, src, "probe", func(s *corev1.Secret) { s.Data["v"] = []byte("two") })
	updateConfigMap(t, src, "probe", func(m *corev1.ConfigMap) { m.Data["v"] = "two" })
	check("replicas updated there", allOf(r.secretIn(dst, "probe", map[string][]byte{"v": []byte("two")}), func(ctx context.Context) (bool, error) { return cm(ctx, "two") }))
	if failed == "" {
		strip := func(ctx context.Context) error {
			if s, err := r.client().CoreV1().Secrets(dst).Get(ctx, "probe", metav1.GetOptions{}); err != nil {
				return err
			} else if delete(s.Labels, keyReplica); true {
				if _, err := r.client().CoreV1().Secrets(dst).Update(ctx, s, metav1.UpdateOptions{}); err != nil {
					return err
				}
			}
			m, err := r.client().CoreV1().ConfigMaps(dst).Get(ctx, "probe", metav1.GetOptions{})
			if err != nil {
				return err
			}
			delete(m.Labels, keyReplica)
			_, err = r.client().CoreV1().ConfigMaps(dst).Update(ctx, m, metav1.UpdateOptions{})
			return err
		}
		updateOnConflict(t, "strip the replicas' label", strip)
		check("stripped replicas found by name and reverted", allOf(func(ctx context.Context) (bool, error) {
			s, err := r.client().CoreV1().Secrets(dst).Get(ctx, "probe", metav1.GetOptions{})
			return err == nil && s.Labels[keyReplica] == "true", err
		}, func(ctx context.Context) (bool, error) { return cm(ctx, "two") }))
	}
	updateSecret(t, src, "probe", func(s *corev1.Secret) { delete(s.Annotations, keyReplicateToClusters) })
	updateConfigMap(t, src, "probe", func(m *corev1.ConfigMap) { delete(m.Annotations, keyReplicateToClusters) })
	check("replicas removed there", allOf(r.secretGone(dst, "probe"), func(ctx context.Context) (bool, error) { return cm(ctx, "") }))
	c.Stop()
	return failed, logShowing(t.Context(), c, refused)
}

// TestHubLeaderKilledMidPropagationToAnotherCluster: the standby keeps the
// other cluster's caches warm (it reports it reachable before it leads);
// the leader killed while it writes a change there, the standby finishes
// it, and no replica there is written twice for it.
func TestHubLeaderKilledMidPropagationToAnotherCluster(t *testing.T) {
	r := startRemote(t)
	id := testID()
	src := newNamespace(t, "src", nil)
	lease := newNamespace(t, "courier-ha", nil)
	const n = 60
	var targets []string
	for range n {
		targets = append(targets, r.namespace(t, "dst", map[string]string{"test": id}))
	}
	createSecret(t, lease, "cluster-far", withLabel(keyCluster, "far"), withData("kubeconfig", string(r.kubeconfig(t))))
	createSecret(t, src, "shared", withAnnotation(keyReplicateTo, "test="+id), withAnnotation(keyReplicateToClusters, "*"), withData("k", "one"))
	// 20 requests a second: the 60 writes of one change take 3 s, so the
	// leader is killed amid them.
	args := []string{"--namespace=" + lease, "--source-namespaces=" + src, "--lease-duration=6s", "--renew-deadline=2s", "--retry-period=500ms",
		"--kube-api-qps=20", "--kube-api-burst=1"}
	a := startCourier(t, args...)
	eventually(t, 30*time.Second, "first courier leads", a.isLeader)
	b := startCourier(t, args...)
	b.WaitReady(t.Context())
	one := map[string][]byte{"k": []byte("one")}
	all := func(want map[string][]byte) func(context.Context) (bool, error) {
		var conds []condition
		for _, ns := range targets {
			conds = append(conds, r.secretIn(ns, "shared", want))
		}
		return allOf(conds...)
	}
	eventually(t, 4*converge, "every replica there", all(one))
	eventually(t, converge, "the standby's caches of the other cluster are warm", func(ctx context.Context) (bool, error) {
		v, ok := b.MetricValue(ctx, `courier_cluster_reachable{cluster="far"}`)
		return ok && v == 1, nil
	})
	if ok, _ := b.isLeader(t.Context()); ok {
		t.Fatal("both couriers lead")
	}

	list, err := r.client().CoreV1().Secrets("").List(t.Context(), metav1.ListOptions{LabelSelector: keyReplica + "=true"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := r.client().CoreV1().Secrets("").Watch(t.Context(), metav1.ListOptions{LabelSelector: keyReplica + "=true", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	updateSecret(t, src, "shared", func(x *corev1.Secret) { x.Data["k"] = []byte("two") })
	eventually(t, converge, "the leader has begun writing there", func(ctx context.Context) (bool, error) {
		for _, ns := range targets {
			if ok, err := r.secretIn(ns, "shared", map[string][]byte{"k": []byte("two")})(ctx); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	})
	a.Signal(syscall.SIGKILL)
	if done, _ := all(map[string][]byte{"k": []byte("two")})(t.Context()); done {
		t.Fatal("the leader wrote every replica there before it was killed: nothing tested a kill mid-propagation")
	}
	eventually(t, 30*time.Second, "the standby leads and finishes the change there", all(map[string][]byte{"k": []byte("two")}))
	consistently(t, quiet, "and it stays", all(map[string][]byte{"k": []byte("two")}))
	writes := map[string]int{}
drain:
	for {
		select {
		case ev, open := <-w.ResultChan():
			if !open {
				t.Fatal("the watch of the replicas there ended")
			}
			if s, ok := ev.Object.(*corev1.Secret); ok && ev.Type != watch.Bookmark {
				writes[s.Namespace+" "+string(ev.Type)]++
			}
		case <-time.After(time.Second): // every event was sent by now
			break drain
		}
	}
	for _, ns := range targets {
		if got := writes[ns+" MODIFIED"]; got != 1 {
			t.Errorf("the replica in %s was updated %d times for one change, want once", ns, got)
		}
	}
	for k, v := range writes {
		if !strings.HasSuffix(k, " MODIFIED") {
			t.Errorf("%d %s events there: nothing but the updates was to happen", v, k)
		}
	}
}

// clusterStatus runs `courier status -o json` for s's courier and checks
// what it says of the cluster name.
func clusterStatus(t *testing.T, s replicationSetup, name string, ok func(status.RemoteCluster) bool) {
	t.Helper()
	r := statusReport(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	for _, c := range r.Clusters {
		if c.Name == name {
			if !ok(c) {
				t.Errorf("courier status says of cluster %s: %+v", name, c)
			}
			return
		}
	}
	t.Errorf("courier status lists no cluster %s: %+v (%s)", name, r.Clusters, r.ClustersNote)
}
