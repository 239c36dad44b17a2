package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/e2e/cluster"
)

// Scenario 7's names: the source, its replicas' namespaces in every other
// cluster, and the floor's Secret there.
const (
	crossName  = "cross"
	crossLabel = "bench-cross" // =yes on scenario 7's namespaces in the other clusters
	crossFloor = "cross-floor"
)

// crossSpec is scenario 7's size: Clusters other clusters (control planes
// of their own: etcd and kube-apiserver) of Namespaces namespaces each.
type crossSpec struct {
	Clusters   int `json:"clusters"`
	Namespaces int `json:"namespaces"`
}

// parseCross reads -clusters: "KxM" ("" or "0x0": no scenario 7).
func parseCross(s string) (crossSpec, error) {
	if s == "" {
		return crossSpec{}, nil
	}
	k, m, ok := strings.Cut(s, "x")
	kc, err1 := strconv.Atoi(k)
	mc, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || kc < 0 || mc < 0 {
		return crossSpec{}, fmt.Errorf("-clusters=%q is not KxM (clusters x namespaces), e.g. 3x100", s)
	}
	return crossSpec{kc, mc}, nil
}

// remote is one other cluster of scenario 7.
type remote struct {
	name   string
	c      *cluster.Cluster
	client kubernetes.Interface
}

// crossClusters is scenario 7: one source replicated into every namespace
// of cs.Clusters other clusters, its update timed from the write to the
// last replica showing it, against the floor: one bare writer per cluster,
// all at once, updating as many Secrets in each (with the floor's
// concurrency per cluster), measured right before and right after. hub is
// the harness's client of courier's cluster.
func crossClusters(ctx context.Context, o options, cs crossSpec, hub kubernetes.Interface) (scenario, error) {
	var remotes []remote
	defer func() {
		for _, r := range remotes {
			r.c.Stop()
		}
	}()
	for i := range cs.Clusters {
		dir, err := filepath.Abs(filepath.Join(o.dir, fmt.Sprintf("remote-%d", i)))
		if err != nil {
			return scenario{}, err
		}
		c, err := cluster.Start(ctx, cluster.Options{BinDir: o.binDir, Dir: dir, Logf: logf, APIServerOnly: true})
		if err != nil {
			return scenario{}, err
		}
		client, err := harnessClient(c.Config)
		if err != nil {
			c.Stop()
			return scenario{}, err
		}
		r := remote{name: fmt.Sprintf("bench-%d", i), c: c, client: client}
		remotes = append(remotes, r)
		if err := parallel(cs.Namespaces, o.workers, func(j int) error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cross-%04d", j), Labels: map[string]string{crossLabel: "yes"}}}
			if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: crossFloor, Namespace: ns.Name}, Data: map[string][]byte{sharedKey: []byte("f0")}}
			_, err := client.CoreV1().Secrets(ns.Name).Create(ctx, s, metav1.CreateOptions{})
			return err
		}); err != nil {
			return scenario{}, err
		}
		kubeconfig, err := os.ReadFile(c.Kubeconfig)
		if err != nil {
			return scenario{}, err
		}
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cluster-" + r.name, Namespace: courierNS, Labels: map[string]string{"courier.dev/cluster": r.name}},
			Data: map[string][]byte{"kubeconfig": kubeconfig}}
		if _, err := hub.CoreV1().Secrets(courierNS).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			return scenario{}, err
		}
	}
	want := cs.Clusters * cs.Namespaces
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: crossName, Namespace: platformNS, Annotations: map[string]string{
		keyReplicTo: crossLabel + "=yes", "courier.dev/replicate-to-clusters": "*"}}, Data: map[string][]byte{sharedKey: []byte("v0")}}
	if _, err := hub.CoreV1().Secrets(platformNS).Create(ctx, src, metav1.CreateOptions{}); err != nil {
		return scenario{}, err
	}
	if _, err := remoteSpan(ctx, o, remotes, crossName, "v0", nil); err != nil {
		return scenario{}, fmt.Errorf("the first replicas in the other clusters: %w", err)
	}
	logf("scenario 7: %d replicas in %d other clusters", want, cs.Clusters)

	floorAlone := func(value string) (float64, error) {
		return remoteSpan(ctx, o, remotes, crossFloor, value, func(r remote) error {
			return parallel(cs.Namespaces, o.workers, func(j int) error {
				return setValue(ctx, r.client, fmt.Sprintf("cross-%04d", j), crossFloor, value, nil)
			})
		})
	}
	prev, err := floorAlone("f1")
	if err != nil {
		return scenario{}, err
	}
	var reps []repetition
	enough := func() bool { s, _, _ := valid(judgeRepetitions(reps)); return len(s) >= o.repeats }
	for i := 0; !enough() && i < 2*o.repeats; i++ {
		value := fmt.Sprintf("v%d-%s", i+1, randomText(8))
		span, err := remoteSpan(ctx, o, remotes, crossName, value, nil, func() error {
			return setValue(ctx, hub, platformNS, crossName, value, nil)
		})
		if err != nil {
			return scenario{}, err
		}
		next, err := floorAlone(fmt.Sprintf("f%d-%s", i+2, randomText(8)))
		if err != nil {
			return scenario{}, err
		}
		logf("cross-cluster update %d: %.2fs (floor %.2fs before, %.2fs after)", i+1, span, prev, next)
		reps = append(reps, repetition{Seconds: span, FloorBefore: prev, FloorAfter: next})
		prev = next
	}
	return timedAgainstFloor(fmt.Sprintf("7. one source update → its %d replicas in %d other clusters (%d namespaces each; the floor: a bare writer per cluster)",
		want, cs.Clusters, cs.Namespaces), reps), nil
}

// remoteSpan watches every remote cluster for the Secrets named name
// holding value, starts write(r) for each cluster at once (and first, if
// given, before), and returns the span from the start to the last one seen.
func remoteSpan(ctx context.Context, o options, remotes []remote, name, value string, write func(remote) error, first ...func() error) (float64, error) {
	waits := make([]func(int, time.Duration) (time.Time, int), len(remotes))
	for i, r := range remotes {
		w, err := watchSecrets(ctx, r.client, metav1.ListOptions{FieldSelector: "metadata.name=" + name},
			func(s *corev1.Secret) bool { return string(s.Data[sharedKey]) == value })
		if err != nil {
			return 0, err
		}
		waits[i] = w
	}
	t0 := time.Now()
	for _, f := range first {
		if err := f(); err != nil {
			return 0, err
		}
	}
	if write != nil {
		errs := make(chan error, len(remotes))
		for _, r := range remotes {
			go func() { errs <- write(r) }()
		}
		for range remotes {
			if err := <-errs; err != nil {
				return 0, err
			}
		}
	}
	var last time.Time
	for i, r := range remotes {
		n := len(remoteNamespaces(ctx, r))
		at, got := waits[i](n, o.patience())
		if got != n {
			return 0, fmt.Errorf("%s: %d of %d Secrets %s showed %q", r.name, got, n, name, value)
		}
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(t0).Seconds(), nil
}

// remoteNamespaces lists scenario 7's namespaces in r.
func remoteNamespaces(ctx context.Context, r remote) []corev1.Namespace {
	l, err := r.client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: crossLabel + "=yes"})
	if err != nil {
		return nil
	}
	return l.Items
}
