package status

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/courier-k8s/courier/internal/clusters"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/replica"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// RemoteCluster is one cluster courier replicates into (a cluster Secret
// in its namespace), as read from there with the Secret's kubeconfig.
type RemoteCluster struct {
	Name   string `json:"name"`
	Secret string `json:"secret"` // namespace/name
	// Reachable: its API server answered the reads below.
	Reachable bool `json:"reachable"`
	// Total counts the replicas sources want there; InSync those holding
	// their source's content.
	InSync int `json:"inSync"`
	Total  int `json:"total"`
	// Error says why it is invalid or unreachable ("" when neither); never
	// a value of the Secret.
	Error string `json:"error,omitempty"`
}

// readTimeout bounds each read from another cluster: one that does not
// answer is reported unreachable, and the report goes on.
const readTimeout = 10 * time.Second

// Clusters reads every cluster Secret in courier's namespace installation
// and, in each cluster, its namespaces and courier's replicas, counting
// those in sync with the sources (c, o) that select it. hub is the cluster
// name courier writes as the replicas' source cluster.
func Clusters(ctx context.Context, client kubernetes.Interface, c Cluster, o Options, hub string) ([]RemoteCluster, error) {
	list, err := client.CoreV1().Secrets(o.Installation).List(ctx, metav1.ListOptions{LabelSelector: wellknown.Cluster})
	if err != nil {
		return nil, fmt.Errorf("list the cluster Secrets in %s: %w", o.Installation, err)
	}
	out := make([]RemoteCluster, 0, len(list.Items))
	for i := range list.Items {
		s := &list.Items[i]
		name, _ := clusters.NameOf(s)
		rc := RemoteCluster{Name: name, Secret: s.Namespace + "/" + s.Name}
		cfg, err := clusters.Config(s)
		if err != nil {
			rc.Error = "invalid: " + err.Error()
			out = append(out, rc)
			continue
		}
		cfg.Timeout = readTimeout
		remote, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			err = clusters.Sanitize(err)
		} else {
			err = rc.count(ctx, remote, c, o, replica.Identity(o.Installation, hub, name), labels.Set(s.Labels))
		}
		if err != nil {
			rc.Error = "unreachable: " + err.Error()
		}
		out = append(out, rc)
	}
	slices.SortFunc(out, func(a, b RemoteCluster) int { return strings.Compare(a.Name+" "+a.Secret, b.Name+" "+b.Secret) })
	return out, nil
}

// count reads the cluster and counts the replicas the sources of c want
// there, and those in sync.
func (rc *RemoteCluster) count(ctx context.Context, remote kubernetes.Interface, c Cluster, o Options, identity string, clusterLabels labels.Set) error {
	nss, err := remote.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	held := map[string]metav1.Object{} // kind/namespace/name
	opts := metav1.ListOptions{LabelSelector: wellknown.Replica + "=true"}
	secrets, err := remote.CoreV1().Secrets("").List(ctx, opts)
	if err != nil {
		return err
	}
	for i := range secrets.Items {
		m := &secrets.Items[i].ObjectMeta
		held[objKey(wellknown.KindSecret, m.Namespace, m.Name)] = m
	}
	cms, err := remote.CoreV1().ConfigMaps("").List(ctx, opts)
	if err != nil {
		return err
	}
	for i := range cms.Items {
		m := &cms.Items[i].ObjectMeta
		held[objKey(wellknown.KindConfigMap, m.Namespace, m.Name)] = m
	}
	rc.Reachable = true
	for _, src := range c.Objects {
		r := o.roleOf(src.Meta)
		a := src.Meta.GetAnnotations()
		sel, err := clusters.Selector(a)
		if !r.Pushes || r.Problem != "" || err != nil || sel == nil || !sel.Matches(clusterLabels) {
			continue
		}
		targets, err := source.TargetsOf(a, o.Compat)
		spec, specErr := source.Parse(a)
		if err != nil || specErr != nil || !targets.Native() {
			continue
		}
		want := replica.Want{Hash: src.Hash, Copied: spec.Copied(src.Meta.GetLabels(), a)}
		ref := src.Meta.GetNamespace() + "/" + src.Meta.GetName()
		for i := range nss.Items {
			ns := &nss.Items[i]
			if ns := namespaces.From(ns); !replica.Eligible(ns, "", o.ExcludeNamespaces) || !targets.Matches(ns) {
				continue
			}
			rc.Total++
			obj, ok := held[objKey(src.Kind, ns.Name, src.Meta.GetName())]
			if !ok {
				continue
			}
			h := obj.GetAnnotations()[wellknown.ContentHash]
			if h == replica.Stamp(want.Hash, "", want.Copied) {
				h = want.Hash
			}
			if replica.Classify(identity, ref, want, obj, h) == replica.InSync {
				rc.InSync++
			}
		}
	}
	return nil
}
