package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// Names and labels of the dataset.
const (
	platformNS  = "bench-platform" // every source lives here
	courierNS   = "bench-courier"  // courier's Lease
	sharedName  = "shared"         // the source replicated to every namespace
	sharedKey   = "token"
	labelBench  = "bench" // =yes on every dataset namespace
	labelGroup  = "group" // g0..g9: one group source each
	labelBurst  = "burst" // b0..b99: one burst source each
	labelFresh  = "fresh" // =yes only on scenario 4's new namespaces
	floorName   = "floor" // the floor client's Secret in every namespace
	floorAnnot  = "bench.courier.dev/floor"
	helmType    = "helm.sh/release.v1"
	groupCount  = 10
	burstCount  = 100
	freshCount  = 50
	keyReplicTo = "courier.dev/replicate-to"
	keyReload   = "courier.dev/reload"
)

// dataset sizes; see flags in main.go.
type dataset struct {
	Namespaces   int `json:"namespaces"`
	Secrets      int `json:"secrets"`
	SecretBytes  int `json:"secretBytes"`
	ConfigMaps   int `json:"configMaps"`
	HelmReleases int `json:"helmReleases"`
	HelmBytes    int `json:"helmBytes"`
	Deployments  int `json:"deployments"`
	Consumers    int `json:"consumers"` // Deployments consuming the shared source, reload on
}

// rawBytes is the size of all Secret and ConfigMap values the dataset creates.
func (d dataset) rawBytes() int64 {
	return int64(d.Secrets)*int64(d.SecretBytes) + int64(d.ConfigMaps)*int64(d.SecretBytes) + int64(d.HelmReleases)*int64(d.HelmBytes)
}

func nsName(i int) string { return fmt.Sprintf("bench-%04d", i) }

func randomBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := randomBytes(n)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return string(b)
}

// parallel runs fn(i) for i in [0,n) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// overloaded reports whether err is how the API server answers when it or
// etcd is overloaded (etcd timed out, the request timed out, too many
// requests): the request may or may not have been carried out, and the
// bench tries it again rather than give up a run of an hour and more.
func overloaded(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsInternalError(err) && strings.Contains(err.Error(), "etcdserver: request timed out")
}

// retrying runs fn until it succeeds, fails otherwise than overloaded, or
// has been tried 6 times (about 10 s of waiting in all).
func retrying(ctx context.Context, fn func() error) error {
	var err error
	for i := range 6 {
		if err = fn(); err == nil || !overloaded(err) {
			return err
		}
		select {
		case <-time.After(time.Duration(i+1) * 700 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// load creates the dataset. Every Deployment runs 0 pods: what is measured
// is courier's patch, not pods starting.
func load(ctx context.Context, c kubernetes.Interface, d dataset, logf func(string, ...any)) error {
	core := c.CoreV1()
	for _, ns := range []string{platformNS, courierNS} {
		if _, err := core.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); ignoreExists(err) != nil {
			return err
		}
	}
	logf("namespaces: %d", d.Namespaces)
	if err := parallel(d.Namespaces, 32, func(i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName(i), Labels: map[string]string{
			labelBench: "yes", labelGroup: fmt.Sprintf("g%d", i%groupCount), labelBurst: fmt.Sprintf("b%d", i%burstCount),
		}}}
		_, err := core.Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return err
	}

	// Sources: shared (every namespace, reload on), group (10 × N/10), burst
	// (100 × N/100) and fresh (50, matching only scenario 4's namespaces).
	type src struct{ name, selector string }
	sources := []src{{sharedName, labelBench + "=yes"}}
	for i := range groupCount {
		sources = append(sources, src{fmt.Sprintf("group-%d", i), fmt.Sprintf("%s=g%d", labelGroup, i)})
	}
	for i := range burstCount {
		sources = append(sources, src{fmt.Sprintf("burst-%d", i), fmt.Sprintf("%s=b%d", labelBurst, i)})
	}
	for i := range freshCount {
		sources = append(sources, src{fmt.Sprintf("fresh-%d", i), labelFresh + "=yes"})
	}
	logf("sources: %d", len(sources))
	if err := parallel(len(sources), 16, func(i int) error {
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: sources[i].name, Namespace: platformNS,
				Annotations: map[string]string{keyReplicTo: sources[i].selector}},
			Data: map[string][]byte{sharedKey: []byte(randomText(d.SecretBytes))},
		}
		if s.Name == sharedName {
			s.Annotations[keyReload] = "true"
		}
		_, err := core.Secrets(platformNS).Create(ctx, s, metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return err
	}

	logf("secrets: %d of %d bytes, and a floor Secret per namespace", d.Secrets, d.SecretBytes)
	perNS := max(1, d.Secrets/d.Namespaces)
	if err := parallel(d.Secrets, 64, func(i int) error {
		ns := nsName(i / perNS % d.Namespaces)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sec-%d", i%perNS), Namespace: ns},
			Data: map[string][]byte{"v": randomBytes(d.SecretBytes)}}
		_, err := core.Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return err
	}
	if err := parallel(d.Namespaces, 32, func(i int) error {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: floorName, Namespace: nsName(i)},
			Data: map[string][]byte{sharedKey: []byte(randomText(d.SecretBytes))}}
		_, err := core.Secrets(nsName(i)).Create(ctx, s, metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return err
	}

	logf("configmaps: %d", d.ConfigMaps)
	cmPerNS := max(1, d.ConfigMaps/d.Namespaces)
	if err := parallel(d.ConfigMaps, 64, func(i int) error {
		ns := nsName(i / cmPerNS % d.Namespaces)
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i%cmPerNS), Namespace: ns},
			Data: map[string]string{"v": randomText(d.SecretBytes)}}
		_, err := core.ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return err
	}

	logf("helm releases: %d of %d bytes (courier never lists them)", d.HelmReleases, d.HelmBytes)
	if err := parallel(d.HelmReleases, 8, func(i int) error {
		ns := nsName(i % d.Namespaces)
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sh.helm.release.v1.app-%d.v1", i), Namespace: ns},
			Type: helmType, Data: map[string][]byte{"release": randomBytes(d.HelmBytes)}}
		_, err := core.Secrets(ns).Create(ctx, s, metav1.CreateOptions{})
		return ignoreExists(err)
	}); err != nil {
		return err
	}

	logf("deployments: %d (%d consume %s with reload on)", d.Deployments, d.Consumers, sharedName)
	perNSDeploy := max(1, d.Deployments/d.Namespaces)
	return parallel(d.Deployments, 64, func(i int) error {
		ns := nsName(i / perNSDeploy % d.Namespaces)
		dep := deployment(ns, fmt.Sprintf("app-%d", i%perNSDeploy), i, i < d.Consumers, perNS, cmPerNS)
		_, err := c.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{})
		return ignoreExists(err)
	})
}

// deployment consumes 1–3 of its namespace's Secrets and ConfigMaps through
// env, envFrom or volumes (by i), and the shared replica when consumer.
func deployment(ns, name string, i int, consumer bool, secrets, configMaps int) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	c := corev1.Container{Name: "app", Image: "registry.example/app:1"}
	var volumes []corev1.Volume
	secret := fmt.Sprintf("sec-%d", i%secrets)
	cm := fmt.Sprintf("cm-%d", i%configMaps)
	switch i % 3 {
	case 0:
		c.Env = []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "v"}}}}
	case 1:
		c.EnvFrom = []corev1.EnvFromSource{
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}},
		}
	case 2:
		volumes = []corev1.Volume{
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret}}},
			{Name: "c", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}},
		}
	}
	if consumer {
		c.Env = append(c.Env, corev1.EnvVar{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: sharedName}, Key: sharedKey}}})
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](0),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, Volumes: volumes},
			},
		},
	}
}

// patience is how long the bench waits for the cluster (to go quiet, for
// every replica or rollout) before it gives up: 5 minutes, longer for large
// datasets, whose every rollout makes the Deployment controller create a
// ReplicaSet.
func (d dataset) patience() time.Duration {
	return max(5*time.Minute, time.Duration(d.Namespaces)*100*time.Millisecond)
}
