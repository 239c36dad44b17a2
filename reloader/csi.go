package reloader

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// A workload mounting a Secrets Store CSI driver volume consumes its
// SecretProviderClass (inputs.Of): the objects the driver fetched from the
// external store. The driver reports what it mounted, per pod and volume,
// in SecretProviderClassPodStatus objects: each object's id and version.
// It rewrites a report when it rotates that pod's mount to new versions,
// each node on its own timer; a report is removed with its pod, and a new
// pod gets one holding what the store has then.
//
// So the class's content, as the reloader reads it (classState), moves
// only forward, and only on a rotation: it is the objects of the latest
// report rewritten with other objects (at courier's start, of the newest
// report). A report rewritten with what the class already holds (the
// other pods' rotations), a new pod's report, and a report removed (even
// the newest, leaving older ones that still hold old versions) change
// nothing. One rotation gives one rollout.

// classState is what the reloader knows of one SecretProviderClass in one
// namespace: the report that set its content. It lives while reports on
// the class exist or workloads consume it.
func (c *Controller) classState(ik string) *unstructured.Unstructured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.providers[ik]
}

// newestReport is the most recently written SecretProviderClassPodStatus
// on class in namespace, or nil.
func (c *Controller) newestReport(namespace, class string) *unstructured.Unstructured {
	if c.providerStatuses == nil {
		return nil
	}
	objs, _ := c.providerStatuses.ByIndex(informers.ByProviderClass, namespace+"/"+class)
	var newest *unstructured.Unstructured
	for _, o := range objs {
		u, ok := o.(*unstructured.Unstructured)
		if ok && (newest == nil || newerVersion(u.GetResourceVersion(), newest.GetResourceVersion())) {
			newest = u
		}
	}
	return newest
}

// newerVersion reports whether resourceVersion a is later than b. The API
// server's are integers (etcd revisions); others compare as strings.
func newerVersion(a, b string) bool {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return a > b
	}
	return x > y
}

// reportEntries is what a SecretProviderClassPodStatus says its class
// holds: one entry per object id, the digest of its version, in key order.
func reportEntries(u *unstructured.Unstructured) []content.Entry {
	objs, _, _ := unstructured.NestedSlice(u.Object, "status", "objects")
	out := make([]content.Entry, 0, len(objs))
	seen := map[string]bool{}
	for _, o := range objs {
		m, ok := o.(map[string]any)
		if !ok {
			continue
		}
		id, _ := m["id"].(string)
		version, _ := m["version"].(string)
		if id == "" || seen[id] {
			continue
		}
		seen[id] = true
		sum := sha256.Sum256([]byte(version))
		out = append(out, content.Entry{Key: id, Digest: hex.EncodeToString(sum[:])})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// classOf is the class a SecretProviderClassPodStatus (or its tombstone)
// reports on, and the class's InputKey.
func classOf(obj any) (namespace, class, ik string, ok bool) {
	namespace, class, ok = informers.ProviderClassOf(obj)
	return namespace, class, informers.InputKey(wellknown.KindSecretProviderClass, namespace, class), ok
}

// providerHandler keeps classState and queues the consumers of a class
// whose content moved (see above). Reports listed at the informer's start
// seed it with the newest; the sync compares that with the baselines.
func (c *Controller) providerHandler() cache.ResourceEventHandler {
	set := func(ik string, u *unstructured.Unstructured) {
		c.mu.Lock()
		c.providers[ik] = u
		c.mu.Unlock()
	}
	return cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			_, _, ik, ok := classOf(obj)
			if !ok {
				return
			}
			u := obj.(*unstructured.Unstructured)
			known := c.classState(ik)
			switch {
			case known == nil:
				set(ik, u) // first seen: what the store held when its pod mounted it
				c.enqueueConsumers(ik, false, "")
			case initial && newerVersion(u.GetResourceVersion(), known.GetResourceVersion()):
				set(ik, u) // at start, the newest report
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			_, _, ik, ok := classOf(newObj)
			if !ok {
				return
			}
			u := newObj.(*unstructured.Unstructured)
			now := content.Hash(reportEntries(u))
			if now == content.Hash(reportEntries(oldObj.(*unstructured.Unstructured))) {
				return // not a rotation
			}
			if known := c.classState(ik); known != nil &&
				(now == content.Hash(reportEntries(known)) || !newerVersion(u.GetResourceVersion(), known.GetResourceVersion())) {
				return // a rotation to what the class holds already, or older than it
			}
			set(ik, u)
			if c.consumed(ik) && c.storms.changed(ik, c.opts.Clock.Now()) && c.queue.Open() {
				c.logger.Warn("input changing too often: rollouts suppressed", zap.String("input", ik),
					zap.String("why", fmt.Sprintf("changed more than %d times within %s (--reload-storm-changes, --reload-storm-window)", c.opts.StormChanges, c.opts.StormWindow)))
			}
			c.enqueueConsumers(ik, true, u.GetResourceVersion())
		},
		DeleteFunc: func(obj any) {
			ns, class, ik, ok := classOf(obj)
			if !ok {
				return
			}
			if c.newestReport(ns, class) == nil && !c.consumed(ik) {
				c.mu.Lock()
				delete(c.providers, ik) // nothing reports on it, nothing consumes it
				c.mu.Unlock()
				c.storms.forget(ik)
			}
		},
	}
}
