package informers

import (
	"context"
	"errors"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/cache"
)

// namedNamespaceInformer watches the one Namespace object name, with
// requests a Role in that namespace may allow: GET /api/v1/namespaces/name
// and the single-object watch GET /api/v1/watch/namespaces/name. The API
// server authorizes both in namespace name (a list of namespaces, even one
// selected by name, is cluster-scoped and needs a ClusterRole), so
// --watch-namespaces needs no cluster-wide permission to read the labels
// and the deletion of the namespaces it watches.
//
// report is told the answer to each request (nil for NotFound: allowed).
func namedNamespaceInformer(c kubernetes.Interface, name string, report func(error)) cache.SharedIndexInformer {
	var listed atomic.Bool
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, _ metav1.ListOptions) (runtime.Object, error) {
			listed.Store(true)
			// "0": the watch starts from the API server's watch cache
			// and sends the object as it is then, so the object's own,
			// perhaps long compacted, resourceVersion is never watched
			// from.
			list := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "0"}}
			ns, err := c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{ResourceVersion: "0"})
			if apierrors.IsNotFound(err) {
				report(nil)
				return list, nil // not created yet: the watch sees it come
			}
			report(err)
			if err != nil {
				return nil, err
			}
			list.Items = []corev1.Namespace{*ns}
			return list, nil
		},
		WatchFuncWithContext: resume(func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			// A watch resumed from "0" (no event or bookmark since the
			// list) would start afresh and never tell of a deletion in
			// between: relist instead (the GET then finds it gone).
			if !listed.Swap(false) && o.ResourceVersion == "0" {
				return nil, errRelist
			}
			o.Watch = true
			w, err := c.CoreV1().RESTClient().Get().AbsPath("/api/v1/watch/namespaces", name).
				VersionedParams(&o, scheme.ParameterCodec).Watch(ctx)
			report(err)
			return w, err
		}, nil),
	}
	// A list here is one GET: the reflector must not stream it (WatchList).
	return cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}), &corev1.Namespace{}, 0, cache.Indexers{})
}

var errRelist = errors.New("the namespace's watch ended before any event or bookmark: relisting it, so a deletion meanwhile is seen")

// noWatchList says its client cannot stream lists (client-go's
// watchlist.DoesClientNotSupportWatchListSemantics).
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }
