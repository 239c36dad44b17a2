package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

const (
	keyReplicateTo  = "courier.dev/replicate-to"
	keyReplica      = "courier.dev/replica"
	keySource       = "courier.dev/source"
	keyContentHash  = "courier.dev/content-hash"
	keyInstallation = "courier.dev/installation"
	keyManagedBy    = "app.kubernetes.io/managed-by"
)

// replicationSetup is a source namespace, a courier allowed to use it, and
// a test id label that the test's target namespaces carry.
type replicationSetup struct {
	id      string
	src     string
	courier *courierProcess
}

func setupReplication(t *testing.T, extraArgs ...string) replicationSetup {
	t.Helper()
	id := testID()
	src := newNamespace(t, "src", map[string]string{"test": id})
	c := startCourier(t, append([]string{"--source-namespaces=" + src}, extraArgs...)...)
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	return replicationSetup{id: id, src: src, courier: c}
}

// target creates a namespace carrying the test id and labels.
func (s replicationSetup) target(t *testing.T, prefix string, labels map[string]string) string {
	t.Helper()
	l := map[string]string{"test": s.id}
	for k, v := range labels {
		l[k] = v
	}
	return newNamespace(t, prefix, l)
}

func TestReplicaMatchesSourceAndCarriesOnlyCourierMetadata(t *testing.T) {
	s := setupReplication(t)
	prod := s.target(t, "prod", map[string]string{"env": "prod"})
	createSecret(t, s.src, "blogsecret",
		withAnnotation(keyReplicateTo, "env=prod,test="+s.id),
		withAnnotation("argocd.argoproj.io/tracking-id", "app:/Secret:x"),
		withLabel("app.kubernetes.io/instance", "gitops-app"),
		withData("password", "s3cr3t"), withData("user", "blog"))
	want := map[string][]byte{"password": []byte("s3cr3t"), "user": []byte("blog")}
	eventually(t, converge, "replica created", secretIn(prod, "blogsecret", want))

	r, err := getSecret(t.Context(), prod, "blogsecret")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{keyManagedBy: "courier", keyReplica: "true"}, r.Labels); diff != "" {
		t.Errorf("replica labels (-want +got):\n%s", diff)
	}
	if got := r.Annotations[keySource]; got != s.src+"/blogsecret" {
		t.Errorf("%s = %q, want %q", keySource, got, s.src+"/blogsecret")
	}
	if len(r.Annotations) != 3 || len(r.Annotations[keyContentHash]) != 64 || r.Annotations[keyInstallation] != s.courier.namespace {
		t.Errorf("replica annotations = %v, want exactly %s, a sha256 %s and %s=%s",
			r.Annotations, keySource, keyContentHash, keyInstallation, s.courier.namespace)
	}
	if r.Type != corev1.SecretTypeOpaque || r.Immutable != nil {
		t.Errorf("type %q immutable %v, want Opaque and unset", r.Type, r.Immutable)
	}
	if mf := r.ManagedFields; len(mf) == 0 || mf[0].Manager != "courier" {
		t.Errorf("field manager = %v, want courier", mf)
	}
}

func TestReplicatesOnlyIntoEligibleMatchingNamespaces(t *testing.T) {
	s := setupReplication(t, "--exclude-namespaces=skip-*")
	match := map[string]string{"env": "prod"}
	in1 := s.target(t, "prod", match)
	in2 := s.target(t, "prod", match)
	dev := s.target(t, "dev", map[string]string{"env": "dev"})
	excluded := s.target(t, "skip", match)
	disabled := s.target(t, "off", map[string]string{"env": "prod", "courier.dev/replication": "disabled"})
	setNamespaceLabels(t, s.src, func(l map[string]string) { l["env"] = "prod" }) // its own namespace matches too

	createSecret(t, s.src, "db", withAnnotation(keyReplicateTo, "env=prod,test="+s.id), withData("k", "v"))
	want := map[string][]byte{"k": []byte("v")}
	eventually(t, converge, "replicas in both matching namespaces", func(ctx context.Context) (bool, error) {
		a, err := secretIn(in1, "db", want)(ctx)
		if !a || err != nil {
			return a, err
		}
		return secretIn(in2, "db", want)(ctx)
	})
	consistently(t, quiet, "no replica in the namespaces the selector, --exclude-namespaces or replication=disabled leave out",
		secretsGone("db", dev, excluded, disabled))
	src, _ := getSecret(t.Context(), s.src, "db")
	if src.Labels[keyReplica] != "" {
		t.Errorf("the source itself was overwritten as a replica")
	}
}

func TestEverySelectorForm(t *testing.T) {
	s := setupReplication(t)
	a := s.target(t, "a", nil)
	b := s.target(t, "b", nil)
	c := s.target(t, "c", map[string]string{"team": "legacy"})
	tests := []struct {
		name, selector string
		want           []string
		not            []string
	}{
		{"set-based with negation", "test=" + s.id + ",team!=legacy", []string{a, b}, []string{c}},
		{"by name", fmt.Sprintf("kubernetes.io/metadata.name in (%s,%s)", a, c), []string{a, c}, []string{b}},
		{"star", "*", []string{a, b, c}, []string{"kube-system", "kube-public", "kube-node-lease"}},
		{"empty", "", []string{a, b, c}, []string{"kube-system", "kube-public", "kube-node-lease"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := fmt.Sprintf("sel-%d", i)
			createSecret(t, s.src, name, withAnnotation(keyReplicateTo, tt.selector), withData("k", "v"))
			defer deleteSecret(t, s.src, name)
			for _, ns := range tt.want {
				eventually(t, converge, "replica in "+ns, secretIn(ns, name, map[string][]byte{"k": []byte("v")}))
			}
			consistently(t, quiet, fmt.Sprintf("no replica in %v", tt.not), secretsGone(name, tt.not...))
		})
	}
}

// SPEC (replication, lifecycle): each transition converges within one
// second (withinSpec: asserted with the stated slack).
func TestReplicaLifecycle(t *testing.T) {
	s := setupReplication(t)
	sel := "env=prod,test=" + s.id
	first := s.target(t, "first", map[string]string{"env": "prod"})
	createSecret(t, s.src, "app", withAnnotation(keyReplicateTo, sel), withData("v", "1"))
	v1 := map[string][]byte{"v": []byte("1")}
	withinSpec(t, "replica created", secretIn(first, "app", v1))

	later := s.target(t, "later", map[string]string{"env": "prod"})
	withinSpec(t, "new matching namespace gets a replica", secretIn(later, "app", v1))

	setNamespaceLabels(t, later, func(l map[string]string) { l["env"] = "dev" })
	withinSpec(t, "namespace relabelled out: replica deleted", secretGone(later, "app"))
	setNamespaceLabels(t, later, func(l map[string]string) { l["env"] = "prod" })
	withinSpec(t, "namespace relabelled in: replica created", secretIn(later, "app", v1))

	updateSecret(t, s.src, "app", func(x *corev1.Secret) { x.Data["v"] = []byte("2") })
	v2 := map[string][]byte{"v": []byte("2")}
	withinSpec(t, "source change reaches every replica", func(ctx context.Context) (bool, error) {
		ok, err := secretIn(first, "app", v2)(ctx)
		if !ok || err != nil {
			return ok, err
		}
		return secretIn(later, "app", v2)(ctx)
	})

	deleteSecret(t, first, "app")
	withinSpec(t, "deleted replica recreated", secretIn(first, "app", v2))

	updateSecret(t, s.src, "app", func(x *corev1.Secret) {
		x.Annotations[keyReplicateTo] = "kubernetes.io/metadata.name=" + first
	})
	withinSpec(t, "selector narrowed: replica no longer targeted deleted", secretGone(later, "app"))
	consistently(t, quiet, "still-targeted replica kept", secretIn(first, "app", v2))

	updateSecret(t, s.src, "app", func(x *corev1.Secret) { delete(x.Annotations, keyReplicateTo) })
	withinSpec(t, "annotation removed: replicas deleted", secretGone(first, "app"))

	updateSecret(t, s.src, "app", func(x *corev1.Secret) { x.Annotations = map[string]string{keyReplicateTo: sel} })
	withinSpec(t, "annotation back: replicas again", secretIn(later, "app", v2))
	deleteSecret(t, s.src, "app")
	withinSpec(t, "source deleted: replicas deleted", func(ctx context.Context) (bool, error) {
		ok, err := secretGone(first, "app")(ctx)
		if !ok || err != nil {
			return ok, err
		}
		return secretGone(later, "app")(ctx)
	})
}

func TestConfigMapsReplicateWithBinaryData(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: s.src, Annotations: map[string]string{keyReplicateTo: "test=" + s.id}},
		Data:       map[string]string{"a": "1"},
		BinaryData: map[string][]byte{"bin": {0, 1, 2, 255}},
	}
	if _, err := admin().CoreV1().ConfigMaps(s.src).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "configmap replica with data and binaryData", func(ctx context.Context) (bool, error) {
		r, err := admin().CoreV1().ConfigMaps(dst).Get(ctx, "settings", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		return cmp.Equal(cm.Data, r.Data) && cmp.Equal(cm.BinaryData, r.BinaryData) && r.Labels[keyReplica] == "true", nil
	})
}

func TestImmutableAndTypeChangesRecreateTheReplica(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "tls", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	eventually(t, converge, "replica", secretIn(dst, "tls", map[string][]byte{"k": []byte("v")}))
	before, _ := getSecret(t.Context(), dst, "tls")

	updateSecret(t, s.src, "tls", func(x *corev1.Secret) { x.Immutable = ptr.To(true) })
	withinSpec(t, "immutable replica recreated", func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, dst, "tls")
		if err != nil {
			return false, nil
		}
		return r.UID != before.UID && r.Immutable != nil && *r.Immutable, nil
	})

	// Type is immutable in the API: users change it by recreating the source.
	deleteSecret(t, s.src, "tls")
	createSecret(t, s.src, "tls", withAnnotation(keyReplicateTo, "test="+s.id),
		func(x *corev1.Secret) { x.Type = "example.com/custom" }, withData("k", "v2"))
	withinSpec(t, "replica has the new type", func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, dst, "tls")
		if err != nil {
			return false, nil
		}
		return r.Type == "example.com/custom" && string(r.Data["k"]) == "v2", nil
	})
}

func TestUnmanagedObjectIsNeverTouchedThenReplacedWhenGone(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	theirs := createSecret(t, dst, "shared", withData("mine", "keep"), withLabel("owner", "tenant"))
	createSecret(t, s.src, "shared", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))

	eventually(t, converge, "ReplicaConflict event on the source naming the namespace",
		eventWith(s.src, "shared", "ReplicaConflict", dst))
	eventually(t, converge, "conflicts counted", func(ctx context.Context) (bool, error) {
		return metricSum(s.courier.Metrics(ctx), `courier_replicator_conflicts_total{kind="Secret"}`) >= 1, nil
	})
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_replicator_replicas{kind="Secret",state="conflict"}`: 1})
	consistently(t, quiet, "the tenant's object is untouched", func(ctx context.Context) (bool, error) {
		got, err := getSecret(ctx, dst, "shared")
		return err == nil && got.ResourceVersion == theirs.ResourceVersion, err
	})

	deleteSecret(t, dst, "shared")
	eventually(t, converge, "replica created once the object is gone", secretIn(dst, "shared", map[string][]byte{"k": []byte("v")}))
}

func TestOlderSourceWins(t *testing.T) {
	id := testID()
	srcA := newNamespace(t, "srca", nil)
	srcB := newNamespace(t, "srcb", nil)
	c := startCourier(t, "--source-namespaces="+srcA+","+srcB)
	c.WaitReady(t.Context())
	dst := newNamespace(t, "dst", map[string]string{"test": id})

	createSecret(t, srcA, "cert", withAnnotation(keyReplicateTo, "test="+id), withData("from", "a"))
	time.Sleep(1100 * time.Millisecond) // creation timestamps have one-second resolution
	createSecret(t, srcB, "cert", withAnnotation(keyReplicateTo, "test="+id), withData("from", "b"))

	eventually(t, converge, "the older source's replica", secretIn(dst, "cert", map[string][]byte{"from": []byte("a")}))
	eventually(t, converge, "ReplicaConflict on the younger source", eventWith(srcB, "cert", "ReplicaConflict", dst, srcA+"/cert"))
	consistently(t, quiet, "the older source keeps it", secretIn(dst, "cert", map[string][]byte{"from": []byte("a")}))

	deleteSecret(t, srcA, "cert")
	eventually(t, converge, "the younger source takes over once the older is gone", secretIn(dst, "cert", map[string][]byte{"from": []byte("b")}))
}

func TestInvalidSelectorChangesNothingUntilFixed(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "api", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v1"))
	eventually(t, converge, "replica", secretIn(dst, "api", map[string][]byte{"k": []byte("v1")}))

	updateSecret(t, s.src, "api", func(x *corev1.Secret) {
		x.Annotations[keyReplicateTo] = "env in (prod"
		x.Data["k"] = []byte("v2")
	})
	eventually(t, converge, "InvalidSelector event with the parser's message", eventWith(s.src, "api", "InvalidSelector", "env in (prod", "kubectl -l"))
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_replicator_invalid_selectors_total{kind="Secret"}`: 1})
	consistently(t, quiet, "existing replica unchanged", secretIn(dst, "api", map[string][]byte{"k": []byte("v1")}))
	if !strings.Contains(s.courier.Logs(), "invalid replicate-to selector") {
		t.Errorf("no log line for the invalid selector")
	}

	updateSecret(t, s.src, "api", func(x *corev1.Secret) { x.Annotations[keyReplicateTo] = "test=" + s.id })
	eventually(t, converge, "fixed selector resumes", secretIn(dst, "api", map[string][]byte{"k": []byte("v2")}))
}

func TestSourceOutsideAllowedNamespacesIsIgnored(t *testing.T) {
	s := setupReplication(t)
	other := s.target(t, "tenant", nil)
	dst := s.target(t, "dst", nil)
	createSecret(t, other, "stolen", withAnnotation(keyReplicateTo, "*"), withData("k", "v"))
	eventually(t, converge, "SourceNotAllowed event", eventWith(other, "stolen", "SourceNotAllowed", "--source-namespaces"))
	consistently(t, quiet, "nothing replicated", secretGone(dst, "stolen"))
}

func TestServiceAccountTokenIsNeverReplicated(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot", Namespace: s.src}}
	if _, err := admin().CoreV1().ServiceAccounts(s.src).Create(t.Context(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The source namespace is allowed and dst matches: only the token rule
	// can stop the copy. A copy may never be seen even when courier tries:
	// the API server refuses a token Secret without the ServiceAccount
	// annotation (422), and kube-controller-manager deletes one whose
	// ServiceAccount is missing. So the test watches for a creation, and
	// checks courier never even tried one (a refused write is a sync failure).
	created := watchSecretFor(t, dst, "robot-token", watch.Added)
	createSecret(t, s.src, "robot-token", func(x *corev1.Secret) {
		x.Type = corev1.SecretTypeServiceAccountToken
		x.Annotations = map[string]string{corev1.ServiceAccountNameKey: "robot", keyReplicateTo: "test=" + s.id}
	})
	eventually(t, converge, "SourceNotReplicable event", eventWith(s.src, "robot-token", "SourceNotReplicable", "identity"))
	time.Sleep(quiet)
	if created() {
		t.Errorf("a copy of the service-account token was created in %s", dst)
	}
	if strings.Contains(s.courier.Logs(), `"sync failed`) {
		t.Errorf("courier tried to write a copy of the token, which the API server refused")
	}
}

func TestNoReplicaIntoTerminatingNamespace(t *testing.T) {
	s := setupReplication(t)
	dying := s.target(t, "dying", nil)
	// A finalizer holds the namespace in Terminating.
	held := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hold", Namespace: dying, Finalizers: []string{"e2e.courier.dev/hold"}}}
	if _, err := admin().CoreV1().ConfigMaps(dying).Create(t.Context(), held, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cm, err := admin().CoreV1().ConfigMaps(dying).Get(context.Background(), "hold", metav1.GetOptions{})
		if err == nil {
			cm.Finalizers = nil
			_, _ = admin().CoreV1().ConfigMaps(dying).Update(context.Background(), cm, metav1.UpdateOptions{})
		}
	})
	if err := admin().CoreV1().Namespaces().Delete(t.Context(), dying, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, converge, "namespace terminating", func(ctx context.Context) (bool, error) {
		n, err := admin().CoreV1().Namespaces().Get(ctx, dying, metav1.GetOptions{})
		return err == nil && n.Status.Phase == corev1.NamespaceTerminating, err
	})
	live := s.target(t, "live", nil)
	createSecret(t, s.src, "x", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	eventually(t, converge, "replica in the live namespace", secretIn(live, "x", map[string][]byte{"k": []byte("v")}))
	consistently(t, quiet, "none in the terminating one", secretGone(dying, "x"))
	// The API server refuses creates in a terminating namespace (403), so the
	// absence of a replica proves nothing: courier must not even try.
	if n, _ := s.courier.MetricValue(t.Context(), `courier_kube_client_requests_total{code="403",method="POST"}`); n != 0 {
		t.Errorf("courier tried %v create(s) the API server refused (into the terminating namespace)", n)
	}
	if strings.Contains(s.courier.Logs(), `"sync failed`) {
		t.Errorf("courier logged sync failures for a terminating namespace")
	}
}

func TestRestartWritesNothingWhenInSync(t *testing.T) {
	s := setupReplication(t)
	var targets []string
	for range 5 {
		targets = append(targets, s.target(t, "t", nil))
	}
	for i := range 3 {
		createSecret(t, s.src, fmt.Sprintf("s%d", i), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", fmt.Sprint(i)))
	}
	rvs := map[string]string{}
	eventually(t, converge, "15 replicas", func(ctx context.Context) (bool, error) {
		for _, ns := range targets {
			for i := range 3 {
				r, err := getSecret(ctx, ns, fmt.Sprintf("s%d", i))
				if err != nil {
					return false, nil
				}
				rvs[ns+"/"+r.Name] = r.ResourceVersion
			}
		}
		return true, nil
	})
	s.courier.Stop()

	before := apiserverWrites(t, "secrets")
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitReady(t.Context())
	c.WaitLeader(t.Context())
	// All 15 pairs synced (in sync) and the queue drained.
	c.WaitMetricsExactly(t.Context(), map[string]float64{
		`courier_replicator_replicas{kind="Secret",state="in_sync"}`: 15,
		`courier_workqueue_depth{name="replicator"}`:                 0,
	})
	if m := c.Metrics(t.Context()); metricSum(m, "courier_replicator_writes_total") != 0 {
		t.Errorf("courier counted replica writes after a restart in sync:\n%s", linesWith(m, "courier_replicator_writes_total"))
	}
	if after := apiserverWrites(t, "secrets"); after != before {
		t.Errorf("the API server saw %v secret writes during the restart, want 0", after-before)
	}
	for k, rv := range rvs {
		ns, name, _ := strings.Cut(k, "/")
		r, err := getSecret(t.Context(), ns, name)
		if err != nil || r.ResourceVersion != rv {
			t.Errorf("%s rewritten (resourceVersion %s → %s)", k, rv, r.ResourceVersion)
		}
	}
}

// apiserverWrites sums kube-apiserver's apiserver_request_total for
// successful creates, updates and patches of resource, read from its own
// /metrics.
func apiserverWrites(t *testing.T, resource string) float64 {
	t.Helper()
	raw, err := admin().CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	var sum float64
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="`+resource+`"`) ||
			!strings.Contains(line, `code="2`) { // a refused request (409, 422) wrote nothing
			continue
		}
		// Not DELETE: the namespace controller is still emptying earlier
		// tests' namespaces. A deleted replica fails the resourceVersion check.
		for _, verb := range []string{"POST", "PUT", "PATCH", "APPLY"} {
			if strings.Contains(line, `verb="`+verb+`"`) {
				var v float64
				fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v)
				sum += v
			}
		}
	}
	return sum
}

func TestConflictsInManyNamespacesGiveOneSummaryEvent(t *testing.T) {
	s := setupReplication(t)
	var blocked []string
	for range 3 {
		ns := s.target(t, "taken", nil)
		createSecret(t, ns, "popular", withData("theirs", "x"))
		blocked = append(blocked, ns)
	}
	createSecret(t, s.src, "popular", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	eventually(t, converge, "one ReplicaConflict naming all three namespaces",
		eventWith(s.src, "popular", "ReplicaConflict", append(blocked, "3 namespace(s)")...))
	time.Sleep(time.Second) // let any stray per-namespace event arrive before counting
	evs, err := admin().CoreV1().Events(s.src).List(t.Context(), metav1.ListOptions{FieldSelector: "involvedObject.name=popular,reason=ReplicaConflict"})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs.Items) != 1 || evs.Items[0].Count != 1 {
		t.Errorf("ReplicaConflict events = %d (count of first %d), want exactly one", len(evs.Items), firstCount(evs.Items))
	}
}

func firstCount(evs []corev1.Event) int32 {
	if len(evs) == 0 {
		return 0
	}
	return evs[0].Count
}
