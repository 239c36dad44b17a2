package status

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/pager"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Collect reads what Build needs, page by page, within scope (courier's
// --watch-namespaces and --resource-label-selector): what that courier
// sees. Secrets and ConfigMaps are listed as
// metadata only (never Helm release Secrets); only sources are read in
// full, to hash their content.
func Collect(ctx context.Context, client kubernetes.Interface, meta metadata.Interface, compat source.Compat, scope informers.Scope) (Cluster, error) {
	var c Cluster
	if len(scope.Namespaces) == 0 {
		nss, err := client.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
		if err != nil {
			return c, fmt.Errorf("list namespaces: %w", err)
		}
		c.Namespaces = nss.Items
	}
	for _, name := range scope.Namespaces { // by name, as a namespace-scoped courier reads them
		ns, err := client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return c, fmt.Errorf("get namespace %s: %w", name, err)
		}
		c.Namespaces = append(c.Namespaces, *ns)
	}

	for _, kind := range []string{wellknown.KindSecret, wellknown.KindConfigMap} {
		gvr, opts := corev1.SchemeGroupVersion.WithResource("secrets"), scope.SecretOptions()
		if kind == wellknown.KindConfigMap {
			gvr, opts = corev1.SchemeGroupVersion.WithResource("configmaps"), scope.ConfigMapOptions()
		}
		for _, ns := range scope.Each() {
			err := each(ctx, metaLister(meta, gvr, ns), opts, func(obj runtime.Object) error {
				m := obj.(*metav1.PartialObjectMetadata)
				o := Object{Kind: kind, Meta: m}
				if role.Of(m, "", role.Config{Compat: compat}).Pushes {
					h, err := sourceHash(ctx, client, kind, m.Namespace, m.Name)
					if apierrors.IsNotFound(err) {
						return nil // deleted since the list: it is no source any more
					}
					if err != nil {
						return err
					}
					o.Hash = h
				}
				c.Objects = append(c.Objects, o)
				return nil
			})
			if err != nil {
				return c, fmt.Errorf("list %ss: %w", kind, err)
			}
		}
	}

	apps, batch := client.AppsV1(), client.BatchV1()
	for _, ns := range scope.Each() {
		listers := map[string]pager.ListPageFunc{
			"deployments": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.Deployments(ns).List(ctx, o)
			},
			"statefulsets": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.StatefulSets(ns).List(ctx, o)
			},
			"daemonsets": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return apps.DaemonSets(ns).List(ctx, o)
			},
			"cronjobs": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return batch.CronJobs(ns).List(ctx, o)
			},
			"jobs": func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return batch.Jobs(ns).List(ctx, o)
			},
		}
		for resource, list := range listers {
			err := each(ctx, list, metav1.ListOptions{}, func(obj runtime.Object) error {
				if m, ok := obj.(metav1.Object); ok {
					if w := WorkloadOf(m); w.Spec != nil {
						c.Workloads = append(c.Workloads, w)
					}
				}
				return nil
			})
			if err != nil {
				return c, fmt.Errorf("list %s: %w", resource, err)
			}
		}
	}
	return c, nil
}

func metaLister(meta metadata.Interface, gvr schema.GroupVersionResource, namespace string) pager.ListPageFunc {
	return func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return meta.Resource(gvr).Namespace(namespace).List(ctx, o)
	}
}

// each calls fn for every item of every page (500 per request).
func each(ctx context.Context, list pager.ListPageFunc, opts metav1.ListOptions, fn func(runtime.Object) error) error {
	p := pager.New(list)
	p.PageSize = 500
	return p.EachListItem(ctx, opts, fn)
}

// sourceHash reads one source whole, with a list selecting it by name:
// courier's RBAC grants list (its informers), never get, on Secrets and
// ConfigMaps, so status needs no more than courier has.
func sourceHash(ctx context.Context, client kubernetes.Interface, kind, ns, name string) (string, error) {
	obj, err := byName(ctx, client, informers.Scope{}, kind, ns, name)
	if err != nil {
		return "", fmt.Errorf("read source %s %s/%s: %w", kind, ns, name, err)
	}
	switch o := obj.(type) {
	case *corev1.Secret:
		return SecretHash(o), nil
	case *corev1.ConfigMap:
		return ConfigMapHash(o), nil
	}
	return "", apierrors.NewNotFound(corev1.Resource(strings.ToLower(kind)+"s"), name)
}
