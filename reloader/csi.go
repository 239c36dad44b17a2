package reloader

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/wellknown"
)

// A workload mounting a Secrets Store CSI driver volume consumes its
// SecretProviderClass (inputs.Of): the objects the driver fetched from the
// external store. The driver reports what it mounted, per pod and volume,
// in SecretProviderClassPodStatus objects: each object's id and version,
// and it updates them when it rotates a mount to new versions. The
// class's content, as the reloader reads it, is the objects and versions
// of its most recently written report in the namespace (highest
// resourceVersion): the first pod the driver rotates tells of the new
// versions; the others' reports, and the new pods' after a rollout, tell
// the same, so one rotation gives one rollout. A report removed with its
// pod changes nothing unless it was the newest and the rest disagree.

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

// providerHandler maps a SecretProviderClassPodStatus event to the
// consumers of its class, when what the class holds (its newest report)
// changed: counted by the circuit breaker like a Secret's change.
func (c *Controller) providerHandler() cache.ResourceEventHandler {
	on := func(obj any) {
		ns, class, ok := informers.ProviderClassOf(obj)
		if !ok {
			return
		}
		ik := informers.InputKey(wellknown.KindSecretProviderClass, ns, class)
		now, exists := "", false
		if r := c.newestReport(ns, class); r != nil {
			now, exists = content.Hash(reportEntries(r)), true
		}
		c.mu.Lock()
		before, seen := c.providers[ik]
		if exists {
			c.providers[ik] = now
		} else {
			delete(c.providers, ik) // no report left: its pods are gone
		}
		c.mu.Unlock()
		switch {
		case !exists || (seen && before == now):
			return
		case !seen:
			c.enqueueConsumers(ik, false) // first seen (as at start): the sync compares with the baselines
			return
		}
		if c.consumed(ik) && c.queue.Open() {
			c.storms.changed(ik, c.opts.Clock.Now())
		}
		c.enqueueConsumers(ik, true)
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    on,
		UpdateFunc: func(_, newObj any) { on(newObj) },
		DeleteFunc: func(obj any) { on(informers.Unwrap(obj)) },
	}
}
