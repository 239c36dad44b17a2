package reloader

import (
	"encoding/json"
	"fmt"
	"maps"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// key names one workload; Kind is one of workload.Kinds.
type key struct {
	Kind, Namespace, Name string
}

func (k key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }

// patch is the merge patch the reloader sends: courier's annotations on the
// workload and, for a rollout, courier.dev/config-hash in the map at hashPath
// (a built-in kind's pod template annotations: workload.HashPath).
// resourceVersion makes it apply only to the workload that was looked at
// ("": to whatever version is there).
func patch(hashPath []string, resourceVersion string, annotations map[string]any, configHash string) ([]byte, error) {
	m := map[string]any{"annotations": annotations}
	if resourceVersion != "" {
		m["resourceVersion"] = resourceVersion
	}
	p := map[string]any{"metadata": m}
	if configHash != "" {
		node := p
		for _, field := range hashPath {
			next, ok := node[field].(map[string]any)
			if !ok {
				next = map[string]any{}
				node[field] = next
			}
			node = next
		}
		node[wellknown.ConfigHash] = configHash
	}
	return json.Marshal(p)
}

// kindInfo is what the reloader knows of one workload kind.
type kindInfo struct {
	indexer  cache.Indexer
	hashPath []string
	// gvr is a custom kind's (--reload-resources), patched through the
	// dynamic client; nil for the built-in kinds.
	gvr *schema.GroupVersionResource
	// hashApart: the hash is written (and its keeping checked) before the
	// record, for a custom kind whose field path the API server may prune.
	hashApart bool
}

// kind returns what the reloader knows of kind name.
func (c *Controller) kind(name string) (kindInfo, bool) {
	c.kindsMu.RLock()
	defer c.kindsMu.RUnlock()
	k, ok := c.kinds[name]
	return k, ok
}

// kindList is every kind the reloader watches now. It is the map itself,
// not a copy (one per input event was a tenth of the reloader's
// allocation at a first start): once the controller runs, AddKind and its
// stop replace c.kinds and never change it, so the caller may range over
// it after the lock is released. Read it only.
func (c *Controller) kindList() map[string]kindInfo {
	c.kindsMu.RLock()
	defer c.kindsMu.RUnlock()
	return c.kinds
}

// AddKind starts reloading a custom kind (--reload-resources) whose CRD is
// served, from its informer (built by package informers, not necessarily
// started or synced yet). The returned function stops it again (the CRD
// is gone or changed). The kind is known by its Custom.Name.
func (c *Controller) AddKind(ck workload.Custom, inf cache.SharedIndexInformer) (stop func(), err error) {
	gvr, name := ck.GVR(), ck.Name()
	c.kindsMu.Lock()
	if _, ok := c.kinds[name]; ok {
		c.kindsMu.Unlock()
		return nil, fmt.Errorf("%s is reloaded already", name)
	}
	kinds := maps.Clone(c.kinds) // copy on write: see kindList
	kinds[name] = kindInfo{indexer: inf.GetIndexer(), hashPath: ck.Path, gvr: &gvr, hashApart: !ck.HasTemplate() && strings.Join(ck.Path, ".") != "metadata.annotations"}
	c.kinds = kinds
	c.kindsMu.Unlock()
	forget := func() {
		c.kindsMu.Lock()
		kinds := maps.Clone(c.kinds)
		delete(kinds, name)
		c.kinds = kinds
		c.kindsMu.Unlock()
	}
	reg, err := inf.AddEventHandler(c.workloadHandler())
	if err != nil {
		forget()
		return nil, fmt.Errorf("reloader: %s handler: %w", name, err)
	}
	return func() {
		_ = inf.RemoveEventHandler(reg)
		forget()
		c.forgetKind(name)
	}, nil
}
