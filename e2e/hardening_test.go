package e2e

// Tests for the hardening review (issue 13): each drives the cluster the
// way the review's reproduction does and fails on the code it was found in.

import (
	"context"
	"crypto/rand"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"

	"github.com/courier-k8s/courier/e2e/cluster"
	"github.com/courier-k8s/courier/e2e/oracle"
)

// fight runs change on the replica ns/name every time done says it is not
// in the other writer's state, until courier stops undoing it (contested)
// or the deadline passes, and returns how many changes it made.
func fight(t *testing.T, what string, done func(*corev1.Secret) bool, change func(*corev1.Secret), contested func(context.Context) (bool, error), ns, name string) int {
	t.Helper()
	changes := 0
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if ok, _ := contested(t.Context()); ok {
			return changes
		}
		r, err := getSecret(t.Context(), ns, name)
		if err == nil && !done(r) {
			change(r)
			if _, err := admin().CoreV1().Secrets(ns).Update(t.Context(), r, metav1.UpdateOptions{}); err == nil {
				changes++
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s: courier never backed off (%d changes made)", what, changes)
	return changes
}

// Item 6: a replica made immutable by someone else (a mutating policy) is
// recreated as a revert, and a fight ends in ReplicaContested with backoff
// rather than a delete/create loop.
func TestImmutableDriftIsARevertWithABudget(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "cfg", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	eventually(t, converge, "replica", secretIn(dst, "cfg", map[string][]byte{"k": []byte("v")}))

	immutable := func(r *corev1.Secret) bool { return r.Immutable != nil && *r.Immutable }
	makeImmutable := func(r *corev1.Secret) { yes := true; r.Immutable = &yes }
	updateSecret(t, dst, "cfg", makeImmutable)
	eventually(t, converge, "ReplicaReverted for the immutable drift", eventWith(dst, "cfg", "ReplicaReverted", s.src+"/cfg"))
	eventually(t, converge, "replica mutable again", func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, dst, "cfg")
		return err == nil && !immutable(r), nil
	})

	// A policy that makes every copy immutable: courier must give up after
	// its budget, not loop.
	changes := fight(t, "immutable drift", immutable, makeImmutable,
		eventWith(dst, "cfg", "ReplicaContested", "more than 5 reverts"), dst, "cfg")
	t.Logf("the other writer made the replica immutable %d more times before courier backed off", changes)
	// Checked within the 10 s backoff, after which courier tries once more.
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{
		`courier_replicator_reverts_total{kind="Secret"}`:                     5,
		`courier_guard_replicas_contested_total{kind="Secret"}`:               1,
		`courier_replicator_writes_total{kind="Secret",operation="recreate"}`: 5,
	})
}

// Item 7: the revert budget is per kind: a fight over ConfigMap app does not
// stop reverts of Secret app in the same namespace.
func TestBudgetIsPerKind(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createConfigMap(t, s.src, "app", map[string]string{keyReplicateTo: "test=" + s.id}, map[string]string{"k": "v"})
	createSecret(t, s.src, "app", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	eventually(t, converge, "ConfigMap replica", configMapIn(dst, "app", map[string]string{"k": "v"}))
	eventually(t, converge, "Secret replica", secretIn(dst, "app", map[string][]byte{"k": []byte("v")}))

	// Fight over the ConfigMap until courier backs off.
	contested := func(ctx context.Context) (bool, error) {
		v, _ := s.courier.MetricValue(ctx, `courier_guard_replicas_contested_total{kind="ConfigMap"}`)
		return v >= 1, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if ok, _ := contested(t.Context()); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("courier never backed off from the ConfigMap fight")
		}
		mine := fmt.Sprintf("writer-%d", i)
		cm, err := admin().CoreV1().ConfigMaps(dst).Get(t.Context(), "app", metav1.GetOptions{})
		if err == nil && cm.Data["k"] == "v" {
			cm.Data["k"] = mine
			_, _ = admin().CoreV1().ConfigMaps(dst).Update(t.Context(), cm, metav1.UpdateOptions{})
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_guard_replicas_contested_total{kind="ConfigMap"}`: 1})

	// The Secret of the same name is still guarded.
	updateSecret(t, dst, "app", func(r *corev1.Secret) { r.Data["k"] = []byte("edited") })
	eventually(t, converge, "the Secret app reverted while the ConfigMap app is contested",
		secretIn(dst, "app", map[string][]byte{"k": []byte("v")}))
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{`courier_guard_replicas_contested_total{kind="Secret"}`: 0})
}

// liveHeap is courier's heap right after a garbage collection (it must run
// with --profiling: the heap profile's gc=1 collects first).
func liveHeap(t *testing.T, p *courierProcess) float64 {
	t.Helper()
	// The smaller of two readings: what the process allocates between its
	// collection and the metrics read (the scrape itself, a resync) is not
	// what it holds.
	least := 0.0
	for i := range 2 {
		if code, _, err := p.get(t.Context(), "/debug/pprof/heap?gc=1"); err != nil || code != 200 {
			t.Fatalf("GET /debug/pprof/heap?gc=1: %d %v", code, err)
		}
		v, ok := p.MetricValue(t.Context(), "go_memstats_heap_alloc_bytes")
		if !ok {
			t.Fatal("no go_memstats_heap_alloc_bytes")
		}
		if i == 0 || v < least {
			least = v
		}
	}
	return least
}

// Items 8 and 9: what a tenant creates outside the source namespaces costs
// courier about its size at most: ConfigMaps of tens of thousands of empty
// keys (which the API server's size limit does not count) are held as one
// digest each, and objects carrying a forged cache marker are digested like
// any other.
func TestTenantObjectsCannotInflateCouriersMemory(t *testing.T) {
	s := setupReplication(t, "--profiling")
	tenant := newNamespace(t, "tenant", nil)
	contentDeletedAtCleanup(t, tenant)
	before := liveHeap(t, s.courier)

	const manyKeyObjects, keys = 4, 60000
	for i := range manyKeyObjects {
		data := make(map[string]string, keys)
		for k := range keys {
			data[fmt.Sprintf("k%05d", k)] = ""
		}
		createConfigMap(t, tenant, fmt.Sprintf("keys-%d", i), nil, data)
	}
	const forgedObjects, size = 20, 500 << 10
	for i := range forgedObjects {
		createConfigMap(t, tenant, fmt.Sprintf("forged-%d", i),
			map[string]string{"cache.courier.dev/values": "sha256"},
			map[string]string{"blob": string(make([]byte, size))})
	}
	// courier's ConfigMap informer has one watch, in resourceVersion order:
	// once the replica of a source created after them exists, its cache
	// holds every one of them. Digesting 240,000 keys and 10 MiB of values
	// (with -race, beside the other tests) may take longer than a change
	// takes to converge; how long is not what this test is about.
	dst := s.target(t, "dst", nil)
	createConfigMap(t, s.src, "last", map[string]string{keyReplicateTo: "test=" + s.id}, map[string]string{"k": "v"})
	eventually(t, 60*time.Second, "courier's cache caught up", configMapIn(dst, "last", map[string]string{"k": "v"}))
	time.Sleep(quiet)
	after := liveHeap(t, s.courier)
	grew := after - before
	t.Logf("heap %.1f MiB → %.1f MiB (+%.1f MiB) for %d ConfigMaps of %d keys and %d of %d KiB with a forged marker",
		before/(1<<20), after/(1<<20), grew/(1<<20), manyKeyObjects, keys, forgedObjects, size>>10)
	if limit := 8.0 * (1 << 20); grew > limit {
		t.Errorf("courier's heap grew %.1f MiB, want under %.0f MiB", grew/(1<<20), limit/(1<<20))
	}
}

// Issue #51: what a tenant's Secrets cost courier does not grow with their
// size. 20,000 Secrets of 1 to 64 KiB (44 MiB of random values), consumed by
// nothing and named by no source, with a tenant's usual labels and
// annotations, grow courier's live heap by at most 8 MiB: courier holds, per
// Secret, its compact metadata without those labels (it bears no mark
// courier reads), never its content.
//
// And a dump of courier's heap (a build with -tags heapdump, see
// heapdump.go) holds no byte of their values (they are listed and watched
// as metadata only: they never reach courier), while it does hold the value
// of a source courier copies (so the search can find one).
func TestUnconsumedTenantSecretsCostLittleWhateverTheirSize(t *testing.T) {
	dump := filepath.Join(t.TempDir(), "heap.dump")
	src := newNamespace(t, "src", nil)
	s := replicationSetup{id: testID(), src: src,
		courier: startCourierFrom(t, buildCourier(t, "-tags heapdump", "-tags", "heapdump"), courierIdentity(), []string{"COURIER_HEAPDUMP=" + dump}, "--source-namespaces="+src, "--profiling")}
	s.courier.WaitReady(t.Context())
	s.courier.WaitLeader(t.Context())
	tenant := newNamespace(t, "tenant", nil)
	contentDeletedAtCleanup(t, tenant)
	before := liveHeap(t, s.courier)

	const secrets, small, workers = 20000, 1 << 10, 16
	size := func(i int) int { // 200 each of 1, 2, 4 … 64 KiB, the rest 1 KiB
		if i < 1400 {
			return small << (i % 7)
		}
		return small
	}
	values := make([][]byte, secrets)
	for i := range values {
		values[i] = make([]byte, size(i))
		_, _ = rand.Read(values[i])
	}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < secrets; i += workers {
				value := values[i]
				sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("tenant-%05d", i),
					Labels:      map[string]string{"app.kubernetes.io/name": "billing", "app.kubernetes.io/instance": fmt.Sprintf("billing-%d", i%50), "team": "payments"},
					Annotations: map[string]string{"owner": "payments@example.com", "rotated-at": time.Now().UTC().Format(time.RFC3339)}},
					Data: map[string][]byte{"value": value}}
				if err := retry.OnError(tooManyRequests, apierrors.IsTooManyRequests, func() error {
					_, err := admin().CoreV1().Secrets(tenant).Create(t.Context(), sec, metav1.CreateOptions{})
					return err
				}); err != nil {
					errs <- fmt.Errorf("create %s: %w", sec.Name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// One watch per kind, in resourceVersion order: once the replica of a
	// source created after them exists, courier's cache holds them all.
	// The source's value is random: courier copies it, so the dump holds it.
	dst := s.target(t, "dst", nil)
	copied := make([]byte, 4<<10)
	_, _ = rand.Read(copied)
	createSecret(t, s.src, "last", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", string(copied)))
	eventually(t, 60*time.Second, "courier's cache caught up", secretIn(dst, "last", map[string][]byte{"k": copied}))
	time.Sleep(quiet)
	after := liveHeap(t, s.courier)
	grew := after - before
	t.Logf("heap %.1f MiB → %.1f MiB (+%.1f MiB, %.0f bytes a Secret) for %d Secrets of 1–64 KiB",
		before/(1<<20), after/(1<<20), grew/(1<<20), grew/secrets, secrets)
	if limit := 8.0 * (1 << 20); grew > limit {
		t.Errorf("courier's heap grew %.1f MiB, want at most %.0f MiB", grew/(1<<20), limit/(1<<20))
	}

	s.courier.Signal(syscall.SIGUSR2)
	var heap []byte
	eventually(t, 60*time.Second, "courier's heap dump", func(context.Context) (bool, error) {
		b, err := os.ReadFile(dump)
		heap = b
		return err == nil, nil
	})
	if held, _ := piecesIn(heap, [][]byte{copied}); len(held) == 0 {
		t.Error("the heap dump lacks the value of the source courier copies: the search cannot find a value")
	}
	// courier lists and watches the Secrets it does not manage as their
	// metadata only: the API server never sends it their values, so not
	// even the client's buffers (a TLS record, an HTTP/2 chunk) hold a
	// piece of one. (The search finds values as raw bytes, as the cache
	// would hold them, not encoded.)
	held, pieces := piecesIn(heap, values)
	t.Logf("a heap dump of %.1f MiB holds %d bytes of the %d Secrets' values (%d of them, in 32-byte pieces)",
		float64(len(heap))/(1<<20), pieces*32, secrets, len(held))
	if pieces > 0 {
		t.Errorf("courier's heap holds %d bytes of the values of %d Secrets it does not copy (e.g. tenant-%05d): the API server sent them",
			pieces*32, len(held), held[0])
	}
}

// piecesIn is the indexes of the values of which heap holds a piece, and
// how many pieces it holds: 32 bytes at an offset in the value that is a
// multiple of 32, so any 63 bytes of a value held in one run are found.
func piecesIn(heap []byte, values [][]byte) (held []int, pieces int) {
	const n = 32
	of := map[[n]byte]int{}
	for i, v := range values {
		for off := 0; off+n <= len(v); off += n {
			of[[n]byte(v[off:off+n])] = i
		}
	}
	seen := map[int]bool{}
	for off := 0; off+n <= len(heap); off++ {
		if i, ok := of[[n]byte(heap[off:off+n])]; ok {
			seen[i] = true
			pieces++
		}
	}
	return slices.Sorted(maps.Keys(seen)), pieces
}

// tooManyRequests retries a request the API server answers 429 (its
// priority and fairness queues full) every 100 ms for up to a minute.
var tooManyRequests = wait.Backoff{Duration: 100 * time.Millisecond, Factor: 1, Steps: 600}

// Item 9: a source carrying the cache marker is a source like any other.
func TestASourceWithAForgedCacheMarkerIsReplicated(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "marked", withAnnotation(keyReplicateTo, "test="+s.id),
		withAnnotation("cache.courier.dev/values", "sha256"), withData("k", "v"))
	eventually(t, converge, "replica of the marked source", secretIn(dst, "marked", map[string][]byte{"k": []byte("v")}))
}

// Item 10: objects carrying courier.dev/replicate-to outside the allowed
// source namespaces never fan out (they still get SourceNotAllowed), and a
// standby holds no backlog of them.
func TestAnnotatedObjectsOutsideSourceNamespacesDoNotFanOut(t *testing.T) {
	id := testID()
	src := newNamespace(t, "src", nil)
	lease := newNamespace(t, "courier-ha", nil)
	args := []string{"--namespace=" + lease, "--source-namespaces=" + src}
	leader := startCourier(t, args...)
	leader.WaitLeader(t.Context())
	standby := startCourier(t, args...)
	standby.WaitReady(t.Context())
	createSecret(t, src, "real", withAnnotation(keyReplicateTo, "test="+id), withData("k", "v"))

	const strays = 200
	tenant := newNamespace(t, "tenant", nil)
	for i := range strays {
		createConfigMap(t, tenant, fmt.Sprintf("stray-%03d", i), map[string]string{keyReplicateTo: "*"}, map[string]string{"k": "v"})
	}
	eventually(t, 30*time.Second, "SourceNotAllowed on the last stray", eventWith(tenant, fmt.Sprintf("stray-%03d", strays-1), "SourceNotAllowed"))
	time.Sleep(quiet)

	adds := func(p *courierProcess) float64 {
		v, _ := p.MetricValue(t.Context(), `courier_workqueue_adds_total{name="replicator"}`)
		return v
	}
	if d, _ := standby.MetricValue(t.Context(), `courier_workqueue_depth{name="replicator"}`); d != 0 {
		t.Errorf("the standby's replicator queue holds %v keys, want 0", d)
	}
	if a := adds(standby); a != 0 {
		t.Errorf("the standby queued %v keys, want none", a)
	}

	before := adds(leader)
	dst := newNamespace(t, "dst", map[string]string{"test": id})
	eventually(t, converge, "the real source's replica in the new namespace", secretIn(dst, "real", map[string][]byte{"k": []byte("v")}))
	time.Sleep(quiet)
	grew := adds(leader) - before
	t.Logf("a new namespace cost the leader %v queue adds with %d strays in the cluster", grew, strays)
	if grew >= strays {
		t.Errorf("a new namespace queued %v keys: the %d strays fanned out", grew, strays)
	}
	if _, err := admin().CoreV1().ConfigMaps(dst).Get(t.Context(), "stray-000", metav1.GetOptions{}); err == nil {
		t.Error("a stray was replicated")
	}
}

// Item 1: a retired protected source stays retired when a standby takes over.
func TestARetiredProtectedSourceStaysRetiredAcrossALeaderChange(t *testing.T) {
	id := testID()
	src := newNamespace(t, "src", nil)
	lease := newNamespace(t, "courier-ha", nil)
	dst := newNamespace(t, "dst", map[string]string{"test": id})
	args := []string{"--namespace=" + lease, "--source-namespaces=" + src}
	leader := startCourier(t, args...)
	leader.WaitLeader(t.Context())
	standby := startCourier(t, args...)
	standby.WaitReady(t.Context())

	createSecret(t, src, "ca", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+id), withData("k", "v"))
	eventually(t, converge, "replica", secretIn(dst, "ca", map[string][]byte{"k": []byte("v")}))
	deleteSecret(t, src, "ca")
	eventually(t, converge, "SourceRestored", eventWith(src, "ca", "SourceRestored"))
	eventually(t, converge, "restored", secretIn(src, "ca", map[string][]byte{"k": []byte("v")}))

	updateSecret(t, src, "ca", func(x *corev1.Secret) { delete(x.Labels, keyProtect) })
	deleteSecret(t, src, "ca")
	eventually(t, converge, "replicas deleted with the retired source", secretGone(dst, "ca"))

	leader.Signal(syscall.SIGKILL)
	eventually(t, leaseDuration+10*time.Second, "the standby leads", standby.isLeader)
	consistently(t, quiet, "the retired source stays deleted", secretGone(src, "ca"))
	consistently(t, time.Second, "its replicas stay deleted", secretGone(dst, "ca"))
}

// Item 4: deleting a protected source over and over never deletes one of its
// replicas, whatever the timing between the restore and the cache.
func TestRestoresNeverLoseAReplica(t *testing.T) {
	s := setupReplication(t)
	var targets []string
	for range 3 {
		targets = append(targets, s.target(t, "dst", nil))
	}
	createSecret(t, s.src, "ca", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	for _, ns := range targets {
		eventually(t, converge, "replica in "+ns, secretIn(ns, "ca", map[string][]byte{"k": []byte("v")}))
	}
	deleted := map[string]func() bool{}
	for _, ns := range targets {
		deleted[ns] = watchSecretFor(t, ns, "ca", watch.Deleted)
	}
	for i := range 10 {
		before, err := getSecret(t.Context(), s.src, "ca")
		if err != nil {
			t.Fatal(err)
		}
		deleteSecret(t, s.src, "ca")
		eventually(t, converge, fmt.Sprintf("restore %d", i+1), func(ctx context.Context) (bool, error) {
			got, err := getSecret(ctx, s.src, "ca")
			return err == nil && got.UID != before.UID, nil
		})
	}
	time.Sleep(quiet)
	for _, ns := range targets {
		if deleted[ns]() {
			t.Errorf("the replica in %s was deleted during the restores", ns)
		}
	}
}

// Item 18: a Secret of type helm.sh/release.v1 (which courier never lists)
// holding the name is reported as a conflict, not retried in silence.
func TestAnInvisibleSquatterIsAConflict(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	squatter := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "squat"}, Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("x")}}
	if _, err := admin().CoreV1().Secrets(dst).Create(t.Context(), squatter, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createSecret(t, s.src, "squat", withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	eventually(t, 2*converge, "ReplicaConflict naming the namespace", eventWith(s.src, "squat", "ReplicaConflict", dst))
	s.courier.WaitMetricsExactly(t.Context(), map[string]float64{
		`courier_replicator_replicas{kind="Secret",state="conflict"}`: 1,
		`courier_replicator_replicas{kind="Secret",state="in_sync"}`:  0,
	})
	got, err := getSecret(t.Context(), dst, "squat")
	if err != nil || got.Type != "helm.sh/release.v1" || string(got.Data["release"]) != "x" {
		t.Errorf("the squatter was touched: %v %v", got, err)
	}
}

// Item 19: an invalid selector on the older of two same-named sources keeps
// its claim: the younger does not take its replicas over.
func TestAnInvalidSelectorOnTheOlderSourceKeepsItsClaim(t *testing.T) {
	id := testID()
	a, b := newNamespace(t, "srca", nil), newNamespace(t, "srcb", nil)
	dst := newNamespace(t, "dst", map[string]string{"test": id})
	c := startCourier(t, "--source-namespaces="+a+","+b)
	c.WaitLeader(t.Context())
	createSecret(t, a, "db", withAnnotation(keyReplicateTo, "test="+id), withData("k", "older"))
	eventually(t, converge, "the older's replica", secretIn(dst, "db", map[string][]byte{"k": []byte("older")}))
	createSecret(t, b, "db", withAnnotation(keyReplicateTo, "test="+id), withData("k", "younger"))
	eventually(t, converge, "the younger gets ReplicaConflict", eventWith(b, "db", "ReplicaConflict", a+"/db"))

	updateSecret(t, a, "db", func(x *corev1.Secret) { x.Annotations[keyReplicateTo] = "test in (" })
	eventually(t, converge, "InvalidSelector on the older", eventWith(a, "db", "InvalidSelector"))
	// The younger's pairs are synced again when it changes, or when the
	// namespace does.
	updateSecret(t, b, "db", func(x *corev1.Secret) { x.Data["k"] = []byte("younger, changed") })
	setNamespaceLabels(t, dst, func(l map[string]string) { l["touched"] = "yes" })
	consistently(t, quiet, "the replica stays the older's", func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, dst, "db")
		return err == nil && r.Annotations[keySource] == a+"/db" && string(r.Data["k"]) == "older", err
	})
}

// Item 21: an overlay that sets only namespace: installs a working courier
// elsewhere: nothing rendered names courier-system, and the guard policy lets
// courier's own reverts through (it checks the verb override, which courier's
// ClusterRole grants, not a ServiceAccount's name).
func TestInstallIntoAnotherNamespace(t *testing.T) {
	const overlay, ns = "e2e/testdata/overlay-namespace", "courier-ops"
	ctx := t.Context()
	rendered, err := kubectl(ctx, "kustomize", overlay)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(rendered), installNamespace) {
		t.Errorf("the overlay's render still names %s:\n%s", installNamespace, linesWith(string(rendered), installNamespace))
	}
	t.Cleanup(func() {
		_, _ = kubectl(context.Background(), "delete", "-k", overlay, "--wait=true", "--timeout=90s")
		restoreSuiteRBAC(t) // the overlay's ClusterRole and binding are the suite's
	})
	if out, err := kubectl(ctx, "apply", "-k", overlay); err != nil {
		t.Fatalf("kubectl apply -k %s: %v\n%s", overlay, err, out)
	}
	eventually(t, 60*time.Second, "Deployment courier in "+ns+" available", func(ctx context.Context) (bool, error) {
		d, err := admin().AppsV1().Deployments(ns).Get(ctx, "courier", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2, err
	})

	// courier as the overlay's ServiceAccount, with the RBAC the overlay installed.
	id := testID()
	src := newNamespace(t, "src", nil)
	dst := newNamespace(t, "dst", map[string]string{"test": id})
	c := startCourierAs(t, identity{sa: "courier", rules: env.rbac, namespace: ns}, nil, "--namespace="+ns, "--source-namespaces="+src)
	c.WaitLeader(ctx)
	createSecret(t, src, "cfg", withAnnotation(keyReplicateTo, "test="+id), withData("k", "v"))
	eventually(t, converge, "replica", secretIn(dst, "cfg", map[string][]byte{"k": []byte("v")}))

	// The policy is enforced: someone who may edit Secrets there may not edit the replica.
	alice := clientFor(t, env.cluster.Impersonating("alice-"+id))
	bindRole(t, dst, "alice-"+id, editRole)
	eventually(t, converge, "the guard policy denies alice", func(ctx context.Context) (bool, error) {
		err := tryWrite(ctx, alice, "update", dst, "cfg")
		return err != nil && strings.Contains(err.Error(), "courier guards"), nil
	})
	// courier's revert of an edit gets through it.
	updateSecret(t, dst, "cfg", func(x *corev1.Secret) { x.Data["k"] = []byte("edited") })
	eventually(t, converge, "courier reverted the edit through the policy", secretIn(dst, "cfg", map[string][]byte{"k": []byte("v")}))
}

// Item 22: a controller that keeps a protected source up to date (External
// Secrets, cert-manager) is let through by binding ClusterRole
// courier-override to its ServiceAccount; one without it is denied.
func TestOverrideRoleLetsAControllerUpdateAProtectedSource(t *testing.T) {
	installGuardPolicy(t)
	objs, err := renderManifests(t.Context(), "manifests")
	if err != nil {
		t.Fatal(err)
	}
	var role *rbacv1.ClusterRole
	for _, o := range objs {
		if r, ok := o.(*rbacv1.ClusterRole); ok && r.Name == "courier-override" {
			role = r
		}
	}
	if role == nil {
		t.Fatal("manifests/ ship no ClusterRole courier-override")
	}
	if _, err := admin().RbacV1().ClusterRoles().Create(t.Context(), role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin().RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})

	src := newNamespace(t, "src", nil)
	createSecret(t, src, "tls", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "*"), withData("tls.crt", "v1"))
	eso := cluster.ServiceAccountUser("external-secrets", "external-secrets")
	other := cluster.ServiceAccountUser("tools", "other")
	for _, user := range []string{eso, other} {
		bindRole(t, src, user, editRole)
	}
	bindRole(t, src, eso, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "courier-override"})
	esoClient := clientFor(t, env.cluster.AsServiceAccount("external-secrets", "external-secrets"))
	otherClient := clientFor(t, env.cluster.AsServiceAccount("tools", "other"))
	eventually(t, converge, "the policy denies a ServiceAccount without courier-override", func(ctx context.Context) (bool, error) {
		err := tryWrite(ctx, otherClient, "update", src, "tls")
		return err != nil && strings.Contains(err.Error(), "courier guards"), nil
	})
	for _, op := range []string{"update", "delete"} {
		if err := tryWrite(t.Context(), esoClient, op, src, "tls"); err != nil {
			t.Errorf("the ServiceAccount bound to courier-override may not %s the protected source: %v", op, err)
		}
	}
}

// Item 20: two installations with different --source-namespaces leave each
// other's replicas alone: a replica names the installation that made it, and
// another installation reports a same-named source's claim as a conflict.
func TestTwoInstallationsLeaveEachOthersReplicasAlone(t *testing.T) {
	id := testID()
	srcA, srcB := newNamespace(t, "srca", nil), newNamespace(t, "srcb", nil)
	dst := newNamespace(t, "dst", map[string]string{"test": id})
	a := startCourier(t, "--source-namespaces="+srcA)
	b := startCourier(t, "--source-namespaces="+srcB)
	a.WaitLeader(t.Context())
	b.WaitLeader(t.Context())

	createSecret(t, srcA, "shared", withAnnotation(keyReplicateTo, "test="+id), withData("k", "from-a"))
	eventually(t, converge, "a's replica", secretIn(dst, "shared", map[string][]byte{"k": []byte("from-a")}))
	replica, err := getSecret(t.Context(), dst, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if got := replica.Annotations[keyInstallation]; got != a.namespace {
		t.Errorf("%s = %q, want %q", keyInstallation, got, a.namespace)
	}
	createSecret(t, srcB, "shared", withAnnotation(keyReplicateTo, "test="+id), withData("k", "from-b"))
	eventually(t, converge, "b reports the name taken", eventWith(srcB, "shared", "ReplicaConflict", dst))
	consistently(t, quiet, "a's replica stays, untouched", func(ctx context.Context) (bool, error) {
		r, err := getSecret(ctx, dst, "shared")
		return err == nil && r.UID == replica.UID && r.ResourceVersion == replica.ResourceVersion, err
	})
	b.WaitMetricsExactly(t.Context(), map[string]float64{
		`courier_replicator_writes_total{kind="Secret",operation="delete"}`: 0,
		`courier_replicator_writes_total{kind="Secret",operation="update"}`: 0,
	})
}

// watchSecretFor reports, when the test asks, whether ns/name saw an event
// of type typ since the watch began (it drains events until 500 ms pass
// without one).
func watchSecretFor(t *testing.T, ns, name string, typ watch.EventType) func() bool {
	t.Helper()
	w, err := admin().CoreV1().Secrets(ns).Watch(t.Context(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return func() bool {
		for {
			select {
			case e := <-w.ResultChan():
				if e.Type == typ {
					return true
				}
			case <-time.After(500 * time.Millisecond):
				return false
			}
		}
	}
}

// Item 2: a protected source deleted while courier is not running is
// restored when it is back, with its content and selector, and its replicas
// are never deleted.
func TestAProtectedSourceDeletedWhileCourierIsDownIsRestored(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	orig := createSecret(t, s.src, "ca", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id),
		withAnnotation("note", "keep me"), withData("ca.crt", "PEM"))
	eventually(t, converge, "replica", secretIn(dst, "ca", orig.Data))
	eventually(t, converge, "backup", func(ctx context.Context) (bool, error) {
		_, err := getSecret(ctx, s.src, "courier-backup.ca")
		return err == nil, nil
	})
	deleted := watchSecretFor(t, dst, "ca", watch.Deleted)

	s.courier.Stop()
	deleteSecret(t, s.src, "ca")
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitLeader(t.Context())
	eventually(t, converge, "restored", secretIn(s.src, "ca", orig.Data))
	got, _ := getSecret(t.Context(), s.src, "ca")
	if got.Annotations[keyReplicateTo] != "test="+s.id || got.Annotations["note"] != "keep me" || got.Labels[keyProtect] != "true" {
		t.Errorf("restored metadata: labels %v annotations %v", got.Labels, got.Annotations)
	}
	eventually(t, converge, "SourceRestored", eventWith(s.src, "ca", "SourceRestored"))
	time.Sleep(quiet)
	if deleted() {
		t.Error("the replica was deleted")
	}
}

// A protected source deleted while courier is down keeps the replicas its
// last-seen selector still wants; one in a namespace relabelled out of it
// meanwhile goes, as it would with the source there. The audit-log oracle
// judges every write of the restarted courier (it found the soak's
// deletions of such replicas, and docs/SPEC.md now says they go).
func TestAProtectedSourceGoneWhileDownKeepsTheReplicasItsSelectorStillWants(t *testing.T) {
	mark := auditMark(t)
	s := setupReplication(t)
	kept := s.target(t, "kept", map[string]string{"tier": "x"})
	out := s.target(t, "out", map[string]string{"tier": "x"})
	orig := createSecret(t, s.src, "ca", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "tier=x,test="+s.id),
		withData("ca.crt", "PEM-"+s.id))
	eventually(t, converge, "replicas and backup", allOf(secretIn(kept, "ca", orig.Data), secretIn(out, "ca", orig.Data),
		func(ctx context.Context) (bool, error) {
			_, err := getSecret(ctx, s.src, "courier-backup.ca")
			return err == nil, nil
		}))
	keptDeleted := watchSecretFor(t, kept, "ca", watch.Deleted)

	s.courier.Stop()
	deleteSecret(t, s.src, "ca")
	setNamespaceLabels(t, out, func(l map[string]string) { l["tier"] = "y" })
	c := startCourier(t, "--namespace="+s.courier.namespace, "--source-namespaces="+s.src)
	c.WaitLeader(t.Context())
	eventually(t, converge, "source restored, the relabelled namespace's replica gone",
		allOf(secretIn(s.src, "ca", orig.Data), secretGone(out, "ca"), secretIn(kept, "ca", orig.Data)))
	time.Sleep(quiet)
	if keptDeleted() {
		t.Error("the replica its selector still wants was deleted")
	}
	c.Stop()
	scope := oracle.Scope{Courier: courierIdentity().user(), Installation: s.courier.namespace,
		Namespaces: map[string]bool{s.src: true, kept: true, out: true}, ProtectedGap: crashBound}
	reportViolations(t, "a protected source gone while courier was down", oracle.Check(auditSince(t, mark), scope, time.Now()))
}

// Item 3: a protected source held by a finalizer, or deleted in the
// foreground, keeps its replicas (same objects) until it is restored.
func TestAProtectedSourceBeingDeletedKeepsItsReplicas(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	createSecret(t, s.src, "ca", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"),
		func(x *corev1.Secret) { x.Finalizers = []string{"example.com/hold"} })
	createSecret(t, s.src, "fg", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"))
	for _, name := range []string{"ca", "fg"} {
		eventually(t, converge, "replica "+name, secretIn(dst, name, map[string][]byte{"k": []byte("v")}))
	}
	deletedCA, deletedFG := watchSecretFor(t, dst, "ca", watch.Deleted), watchSecretFor(t, dst, "fg", watch.Deleted)

	deleteSecret(t, s.src, "ca")
	fg := metav1.DeletePropagationForeground
	if err := admin().CoreV1().Secrets(s.src).Delete(t.Context(), "fg", metav1.DeleteOptions{PropagationPolicy: &fg}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(quiet) // "ca" is held by its finalizer all this time
	if x, err := getSecret(t.Context(), s.src, "ca"); err != nil || x.DeletionTimestamp == nil {
		t.Fatalf("the finalizer does not hold ca: %v %v", x, err)
	}
	updateSecret(t, s.src, "ca", func(x *corev1.Secret) { x.Finalizers = nil })
	for _, name := range []string{"ca", "fg"} {
		eventually(t, converge, name+" restored", func(ctx context.Context) (bool, error) {
			x, err := getSecret(ctx, s.src, name)
			return err == nil && x.DeletionTimestamp == nil, nil
		})
	}
	time.Sleep(quiet)
	if ca, fg := deletedCA(), deletedFG(); ca || fg {
		t.Errorf("replicas deleted: ca %v, fg %v", ca, fg)
	}
}

// Item 5: the garbage collector deleting a protected source whose owner went
// is respected: not restored, and its replicas go with it.
func TestAProtectedSourceTheGarbageCollectorDeletesStaysDeleted(t *testing.T) {
	s := setupReplication(t)
	dst := s.target(t, "dst", nil)
	owner, err := admin().CoreV1().ConfigMaps(s.src).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createSecret(t, s.src, "owned", withLabel(keyProtect, "true"), withAnnotation(keyReplicateTo, "test="+s.id), withData("k", "v"),
		func(x *corev1.Secret) {
			x.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
		})
	eventually(t, converge, "replica", secretIn(dst, "owned", map[string][]byte{"k": []byte("v")}))
	if err := admin().CoreV1().ConfigMaps(s.src).Delete(t.Context(), owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the garbage collector deletes the source", secretGone(s.src, "owned"))
	eventually(t, converge, "its replicas go with it", secretGone(dst, "owned"))
	consistently(t, quiet, "not restored", secretGone(s.src, "owned"))
}
