package informers

import (
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/role"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Index names on the Secret and ConfigMap informers.
const (
	// SourcesByName indexes every source (courier.dev/replicate-to, or with
	// --compat another tool's push annotations) in an allowed source
	// namespace by its name: the sources that could
	// claim a replica of that name. Its index values (ListIndexFuncValues)
	// are the names of all such sources. Annotated objects elsewhere are not
	// in it, so they never fan out.
	SourcesByName = "courier.dev/sources-by-name"
	// ReplicasBySource indexes replicas by their courier.dev/source
	// annotation, "<namespace>/<name>".
	ReplicasBySource = "courier.dev/replicas-by-source"
	// PullsBySource indexes the objects that pull from a source through
	// another tool's annotation (with --compat) by that source,
	// "<namespace>/<name>".
	PullsBySource = "courier.dev/pulls-by-source"
	// Installations indexes the digest key Secret every courier
	// installation writes in its namespace by that namespace: its index
	// values are the installations on the cluster.
	Installations = "courier.dev/installations"
)

// ContentIndexers are the indexers every Secret and ConfigMap informer gets,
// for courier configured as cfg.
func ContentIndexers(cfg role.Config) cache.Indexers {
	return cache.Indexers{
		SourcesByName: func(obj any) ([]string, error) {
			r, m, err := roleOf(obj, cfg)
			if err != nil || !r.Pushes || !r.Allowed {
				return nil, err
			}
			return []string{m.GetName()}, nil
		},
		ReplicasBySource: indexReplicasBySource,
		Installations: func(obj any) ([]string, error) {
			m, err := metaOf(obj)
			if err != nil || m.GetName() != wellknown.DigestKeySecret {
				return nil, err
			}
			if v, _ := objmeta.Label(m, wellknown.DigestKey); v != "true" {
				return nil, nil
			}
			return []string{m.GetNamespace()}, nil
		},
		PullsBySource: func(obj any) ([]string, error) {
			r, _, err := roleOf(obj, cfg)
			if err != nil || r.PullVia == "" {
				return nil, err
			}
			return []string{r.PullRef}, nil
		},
	}
}

// roleOf is the role of a cached Secret or ConfigMap, full or digested.
func roleOf(obj any, cfg role.Config) (role.Role, metav1.Object, error) {
	m, err := metaOf(obj)
	if err != nil {
		return role.Role{}, nil, err
	}
	_, typ, _, _ := content.Fields(Unwrap(obj))
	return role.Of(m, typ, cfg), m, nil
}

func indexReplicasBySource(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	src, ok := objmeta.Annotation(m, wellknown.Source)
	if !ok {
		return nil, nil
	}
	return []string{src}, nil
}

// Unwrap is the object a delete handler or an index function is given: the
// last state the cache knew when the deletion itself was missed (a
// cache.DeletedFinalStateUnknown), else obj itself.
func Unwrap(obj any) any {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Obj
	}
	return obj
}

func metaOf(obj any) (metav1.Object, error) {
	obj = Unwrap(obj)
	return meta.Accessor(obj)
}

// ConsumersByInput indexes workloads (Deployments, StatefulSets, DaemonSets,
// Jobs, CronJobs, custom kinds) by every Secret and ConfigMap they consume
// (workload.Inputs), hashed into one of consumerBuckets buckets: read it
// through Consumers, which keeps those of the bucket that consume the input.
// So a change costs work proportional to its consumers and the few
// workloads sharing their bucket, and the index costs a few thousand sets,
// not one per consumed input: client-go keeps a set (a Go map, about 200
// bytes even with one key) per index value, which was most of what a
// Deployment cost courier.
const ConsumersByInput = "courier.dev/consumers-by-input"

// consumerBuckets is how many ConsumersByInput values there are: with
// 50,000 consumed inputs (10,000 namespaces of the bench), a bucket holds
// about a dozen workloads.
const consumerBuckets = 4096

// bucketNames are the ConsumersByInput values, made once.
var bucketNames = func() (out [consumerBuckets]string) {
	for i := range out {
		out[i] = strconv.Itoa(i)
	}
	return out
}()

// bucketOf is the ConsumersByInput value of an input: an FNV-1a hash of
// its kind, namespace and name.
func bucketOf(kind, namespace, name string) string {
	h := uint64(14695981039346656037)
	for _, s := range [...]string{kind, namespace, name} {
		for i := 0; i < len(s); i++ {
			h = (h ^ uint64(s[i])) * 1099511628211
		}
		h = (h ^ 0xff) * 1099511628211 // a separator no name holds
	}
	return bucketNames[h%consumerBuckets]
}

// Consumers are the workloads in indexer (which has the ConsumersByInput
// index) that consume input ik, an InputKey.
func Consumers(indexer cache.Indexer, ik string) ([]any, error) {
	kind, namespace, name := SplitInputKey(ik)
	objs, err := indexer.ByIndex(ConsumersByInput, bucketOf(kind, namespace, name))
	if err != nil {
		return nil, err
	}
	out := objs[:0] // ByIndex's slice is the caller's
	for _, o := range objs {
		if consumes(o, kind, namespace, name) {
			out = append(out, o)
		}
	}
	return out, nil
}

// consumes reports whether workload obj consumes the input.
func consumes(obj any, kind, namespace, name string) bool {
	m, err := meta.Accessor(obj)
	if err != nil || m.GetNamespace() != namespace {
		return false
	}
	for _, r := range workload.Inputs(obj) {
		if r.Kind == kind && r.Name == name {
			return true
		}
	}
	return false
}

// InputKey names a consumed Secret or ConfigMap (Consumers reads its
// consumers; the ConsumersByInput index holds its bucket).
func InputKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// SplitInputKey is the kind, namespace and name of an InputKey.
func SplitInputKey(ik string) (kind, namespace, name string) {
	kind, rest, _ := strings.Cut(ik, "/")
	namespace, name, _ = strings.Cut(rest, "/")
	return kind, namespace, name
}

// WorkloadIndexers are the indexers every workload informer gets.
var WorkloadIndexers = cache.Indexers{ConsumersByInput: indexConsumersByInput}

func indexConsumersByInput(obj any) ([]string, error) {
	obj = Unwrap(obj)
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	refs := workload.Inputs(obj)
	out := make([]string, 0, len(refs))
	for _, r := range refs {
		if b := bucketOf(r.Kind, m.GetNamespace(), r.Name); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out, nil
}
