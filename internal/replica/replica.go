// Package replica says what holds a source's name in a target namespace
// (Classify) and which namespaces may hold replicas at all (Eligible): the
// one definition the replicator and `courier status` share. It decides from
// what it is given; it reads and writes nothing.
package replica

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/courier-k8s/courier/internal/globs"
	"github.com/courier-k8s/courier/internal/namespaces"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/source"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// Found is what holds a source's name in a target namespace, as courier
// classifies it.
type Found int

const (
	// Missing: nothing holds the name.
	Missing Found = iota
	// Foreign: an object courier did not create (none of its markers).
	Foreign
	// OtherSources: a replica courier made for another source of that name.
	OtherSources
	// Stale: this source's replica, whose content or markers differ from
	// what courier would write now.
	Stale
	// InSync: this source's replica, equal to the source.
	InSync
)

// Want is what a source's replica holds beyond courier's markers.
type Want struct {
	// Hash is the content hash of the keys it holds.
	Hash string
	// Copied is the metadata copied from the source.
	Copied source.Record
	// Via names the other tool's annotation that made it ("" for courier's own).
	Via string
}

// Classify says what obj (nil: nothing) is, to the courier installation
// running in namespace installation, where the source ref wants its replica
// as want says; objHash is the content hash of what obj holds. Another
// installation's replica is Foreign.
func Classify(installation, ref string, want Want, obj metav1.Object, objHash string) Found {
	if obj == nil {
		return Missing
	}
	owner, managed := OwnerOf(obj, installation)
	switch {
	case !managed:
		return Foreign
	case owner != ref:
		return OtherSources
	case objHash != want.Hash || Tampered(obj, want.Hash, ref) ||
		source.RecordOf(obj.GetAnnotations()).Encode() != want.Copied.Encode() || obj.GetAnnotations()[wellknown.Via] != want.Via:
		return Stale
	}
	return InSync
}

// OwnerOf tells whether this installation of courier created m (any of its
// markers is enough, so a stripped label is reverted rather than taken for a
// stranger's object; a replica that names another installation is not) and
// which source it belongs to ("" if that annotation is gone). A replica
// naming no installation was made before replicas named one: it is taken as
// this installation's.
//
// A replica courier wrote into another cluster names the cluster its source
// is in (courier.dev/source-cluster) and the cluster it was written into
// (courier.dev/target-cluster): only the installation that wrote it, asking
// with Identity(installation, source, target), takes it for its own, and
// never by default.
func OwnerOf(m metav1.Object, installation string) (source string, managed bool) {
	inst, named := objmeta.Annotation(m, wellknown.Installation)
	if cluster, ok := objmeta.Annotation(m, wellknown.SourceCluster); ok {
		target, _ := objmeta.Annotation(m, wellknown.TargetCluster)
		inst, named = Identity(inst, cluster, target), true
	}
	if named && inst != installation || !named && strings.Contains(installation, "@") {
		return "", false
	}
	source, hasSource := objmeta.Annotation(m, wellknown.Source)
	managedBy, _ := objmeta.Label(m, wellknown.ManagedBy)
	isReplica, _ := objmeta.Label(m, wellknown.Replica)
	return source, hasSource || managedBy == wellknown.ManagedByValue || isReplica == "true"
}

// Identity is what an installation of courier (its namespace) asks OwnerOf
// and Classify with: itself for replicas in its own cluster; for replicas it
// writes into another cluster, itself, the cluster its sources are in
// (--cluster-name) and the name its cluster Secret gives the other cluster.
func Identity(installation, sourceCluster, targetCluster string) string {
	if sourceCluster == "" {
		return installation
	}
	return installation + "@" + sourceCluster + "/" + targetCluster
}

// Marked reports whether m is a replica of any installation: it names one,
// or carries another of courier's replica markers.
func Marked(m metav1.Object) bool {
	_, managed := OwnerOf(m, "")
	inst, _ := objmeta.Annotation(m, wellknown.Installation)
	return managed || inst != ""
}

// Stamp is the courier.dev/content-hash courier writes on a replica whose
// content hashes to h, made through via and carrying the copied metadata
// rec: h itself for a plain replica; with via or copied metadata, a hash of
// the three, so that an edit to courier.dev/via or
// courier.dev/copied-metadata shows like an edit to the content (Tampered).
func Stamp(h, via string, rec source.Record) string {
	r := rec.Encode()
	if via == "" && r == "" {
		return h
	}
	sum := sha256.Sum256([]byte(h + "\x00" + via + "\x00" + r))
	return hex.EncodeToString(sum[:])
}

// Tampered reports whether a replica courier wrote was changed since: its
// content (whose hash is hash), its courier.dev/via or its
// courier.dev/copied-metadata no longer match what courier stamped on it, or
// courier's labels or annotations, or the metadata it copied, were edited.
// A stamp of the content alone, as courier wrote before it stamped via and
// copied metadata, is taken as it is.
func Tampered(m metav1.Object, hash string, sourceRef string) bool {
	l, a := m.GetLabels(), m.GetAnnotations()
	stamp, rec := a[wellknown.ContentHash], source.RecordOf(a)
	return (stamp != Stamp(hash, a[wellknown.Via], rec) && stamp != hash) || a[wellknown.Source] != sourceRef ||
		l[wellknown.ManagedBy] != wellknown.ManagedByValue || l[wellknown.Replica] != "true" ||
		!rec.Carried(l, a)
}

// systemNamespaces never receive replicas.
var systemNamespaces = map[string]bool{"kube-system": true, "kube-public": true, "kube-node-lease": true}

// Eligible reports whether ns may receive replicas of a source living in
// sourceNamespace, whatever the selector.
func Eligible(ns *namespaces.Namespace, sourceNamespace string, exclude globs.List) bool {
	name := ns.GetName()
	switch {
	case name == sourceNamespace, systemNamespaces[name], exclude.Match(name):
		return false
	case ns.Labels().Get(wellknown.Replication) == "disabled":
		return false
	}
	return !namespaces.Terminating(ns)
}
