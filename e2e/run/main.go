// Command run is `make run`: it starts the local control plane, starts
// courier against it with its logs on this terminal, creates a small demo
// (a source Secret in namespace platform replicated to labelled namespaces,
// and a Deployment consuming a replica), and prints how to look at it with
// kubectl. Ctrl-C stops courier and every control-plane process.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/e2e/cluster"
	"github.com/courier-k8s/courier/internal/wellknown"
)

func main() {
	binDir := flag.String("controlplane-bin", os.Getenv("COURIER_CONTROLPLANE_BIN"), "directory of the control-plane binaries (make controlplane)")
	courier := flag.String("courier", "bin/courier", "the courier binary")
	dir := flag.String("dir", ".run", "working directory for the cluster's data and logs (wiped at start)")
	flag.Parse()
	if err := run(*binDir, *courier, *dir); err != nil {
		fmt.Fprintf(os.Stderr, "make run: %v\n", err)
		os.Exit(1)
	}
}

func run(binDir, courierBin, dir string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "starting the local control plane (etcd, kube-apiserver, controller manager, scheduler, kwok)...")
	c, err := cluster.Start(ctx, cluster.Options{BinDir: binDir, Dir: filepath.Join(dir, "cluster"),
		Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, "  "+f+"\n", a...) }})
	if err != nil {
		return err
	}
	defer c.Stop()

	if err := demo(ctx, c.Client); err != nil {
		return fmt.Errorf("create the demo: %w", err)
	}
	port, err := cluster.FreePort()
	if err != nil {
		return err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(courierBin,
		"--kubeconfig="+c.Kubeconfig,
		"--namespace=courier-system",
		"--source-namespaces=platform",
		"--metrics-addr="+addr)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start courier: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()

	kubectl := filepath.Join(binDir, "kubectl")
	fmt.Fprintf(os.Stderr, `
courier is running against a local cluster (metrics on http://%s/metrics).
In another terminal:

  export KUBECONFIG=%s
  %s get nodes
  %s get secrets -A --field-selector metadata.name=blogsecret -L app.kubernetes.io/managed-by
  %s -n platform patch secret blogsecret -p '{"stringData":{"password":"s3cr3t-v2"}}' && %s -n blog get deploy blog -o jsonpath='{.spec.template.metadata.annotations}'

Ctrl-C stops courier and the cluster.
`, addr, c.Kubeconfig, kubectl, kubectl, kubectl, kubectl)

	select {
	case <-ctx.Done():
		fmt.Fprintln(os.Stderr, "\nstopping courier and the cluster...")
		return nil
	case err := <-exited:
		return fmt.Errorf("courier exited: %v", err)
	}
}

// demo creates: namespaces courier-system and platform; blog and shop
// (env=prod) and sandbox (env=dev); the source platform/blogsecret,
// replicated to env=prod and reloading its consumers; and Deployment blog/blog
// consuming the replica through a secretKeyRef.
func demo(ctx context.Context, client kubernetes.Interface) error {
	namespaces := map[string]map[string]string{
		"courier-system": nil,
		"platform":       nil,
		"blog":           {"env": "prod"},
		"shop":           {"env": "prod"},
		"sandbox":        {"env": "dev"},
	}
	for name, labels := range namespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	src := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "blogsecret", Namespace: "platform",
			Annotations: map[string]string{wellknown.ReplicateTo: "env=prod", wellknown.Reload: "true"}},
		StringData: map[string]string{"username": "blog", "password": "s3cr3t"},
	}
	if _, err := client.CoreV1().Secrets("platform").Create(ctx, src, metav1.CreateOptions{}); err != nil {
		return err
	}
	one := int32(1)
	labels := map[string]string{"app": "blog"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "blog", Namespace: "blog"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "blog",
					Image: "registry.example/blog:1.0",
					Env: []corev1.EnvVar{{Name: "DB_PASSWORD", ValueFrom: &corev1.EnvVarSource{
						SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "blogsecret"}, Key: "password"},
					}}},
				}}},
			},
		},
	}
	_, err := client.AppsV1().Deployments("blog").Create(ctx, d, metav1.CreateOptions{})
	return err
}
