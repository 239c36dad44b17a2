package reloader

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Event reasons.
const (
	ReasonReloaded          = "Reloaded"
	ReasonInputMissing      = "InputMissing"
	ReasonInvalidAnnotation = "InvalidAnnotation"
)

// Reasons in courier_reloader_skipped_total: a change seen that gave no rollout.
const (
	skipFirstSight = "first_sight"
	skipMissing    = "input_missing"
	skipAppeared   = "input_appeared"
)

// digestLen is how many hex characters of each input's digest the baseline
// keeps: 64 bits, ample to tell versions of one input apart, and small.
const digestLen = 16

// baseline maps input IDs ("secret/a") to the digest of their consumed content.
type baseline map[string]string

func (b baseline) String() string {
	ids := make([]string, 0, len(b))
	for id := range b {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, id+"="+b[id])
	}
	return strings.Join(parts, ",")
}

// parseBaseline reads courier.dev/config-inputs; entries it cannot read are
// dropped (they count as inputs appearing, which never rolls out).
func parseBaseline(s string) baseline {
	b := baseline{}
	for _, part := range strings.Split(s, ",") {
		id, d, ok := strings.Cut(strings.TrimSpace(part), "=")
		if ok && id != "" && d != "" {
			b[id] = d
		}
	}
	return b
}

// configHash is the pod-template hash: sha256 over every consumed input's
// digest, in ID order.
func configHash(b baseline) string {
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// consumedDigest is the digest of the keys ref consumes from entries: all of
// them, or only the listed ones that exist. An object the cache holds as one
// whole-content digest (more than content.MaxKeyDigests keys) is consumed
// as a whole.
func consumedDigest(ref inputs.Ref, entries []content.Entry) string {
	whole := len(entries) == 1 && entries[0].Whole
	if !ref.All() && !whole {
		want := map[string]bool{}
		for _, k := range ref.Keys {
			want[k] = true
		}
		kept := entries[:0:0]
		for _, e := range entries {
			if want[e.Key] {
				kept = append(kept, e)
			}
		}
		entries = kept
	}
	return content.Hash(entries)[:digestLen]
}

// diff compares the baseline with now: inputs whose consumed content changed,
// inputs gone, and inputs new.
func diff(before, now baseline) (changed, missing, appeared []string) {
	for id, d := range now {
		old, ok := before[id]
		switch {
		case !ok:
			appeared = append(appeared, id)
		case old != d:
			changed = append(changed, id)
		}
	}
	for id := range before {
		if _, ok := now[id]; !ok {
			missing = append(missing, id)
		}
	}
	sort.Strings(changed)
	sort.Strings(missing)
	sort.Strings(appeared)
	return changed, missing, appeared
}

// input is a consumed object as seen in the cache.
type input struct {
	meta    metav1.Object
	entries []content.Entry
}

func (c *Controller) lookup(kind, namespace, name string) *input {
	idx := c.secrets
	if kind == wellknown.KindConfigMap {
		idx = c.configMaps
	}
	obj, ok, err := idx.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	switch o := obj.(type) {
	case *corev1.Secret:
		return &input{meta: o, entries: content.SecretEntries(o)}
	case *corev1.ConfigMap:
		return &input{meta: o, entries: content.ConfigMapEntries(o)}
	}
	return nil
}

// wantsReload reports whether the object, or the source it was replicated
// from, carries courier.dev/reload: "true".
func (c *Controller) wantsReload(kind string, in *input) bool {
	if in.meta.GetAnnotations()[wellknown.Reload] == "true" {
		return true
	}
	src, ok := in.meta.GetAnnotations()[wellknown.Source]
	if !ok {
		return false
	}
	ns, name, err := cache.SplitMetaNamespaceKey(src)
	if err != nil || ns == "" {
		return false
	}
	s := c.lookup(kind, ns, name)
	return s != nil && s.meta.GetAnnotations()[wellknown.Reload] == "true"
}

// action is what one sync of a workload writes.
type action int

const (
	writeNothing  action = iota
	writeBaseline        // the baseline moved (first sight, inputs gone or new): no rollout
	rollOut              // consumed content changed: a rollout, and the new baseline
)

// decision is the reloader's verdict on one workload.
type decision struct {
	action     action
	changed    []string // opted-in inputs whose consumed content changed (rollOut)
	missing    []string // consumed, non-optional inputs that are gone: InputMissing
	appeared   bool     // inputs seen for the first time (never a rollout)
	firstSight bool     // no baseline yet: this sync writes the first one
}

// observed is a workload's opted-in inputs as the cache holds them now.
type observed struct {
	now      baseline        // the consumed digest of every opted-in input that exists
	optional map[string]bool // every opted-in input → whether its reference is optional
}

// decide compares what a workload consumes now with its stored baseline
// (stored, when hasBaseline). It reads nothing and writes nothing.
func decide(stored string, hasBaseline bool, o observed) decision {
	if len(o.optional) == 0 && !hasBaseline {
		return decision{} // nothing opted in: courier never writes to this workload
	}
	if !hasBaseline {
		return decision{action: writeBaseline, firstSight: true}
	}
	before := parseBaseline(stored)
	changed, gone, appeared := diff(before, o.now)
	d := decision{changed: changed, appeared: len(appeared) > 0}
	for _, id := range gone {
		if optional, stillConsumed := o.optional[id]; stillConsumed && !optional {
			d.missing = append(d.missing, id)
		}
	}
	switch {
	case len(changed) > 0:
		d.action = rollOut
	case o.now.String() != before.String():
		d.action = writeBaseline
	}
	return d
}

// observe reads the opted-in inputs of workload obj from the cache; false
// when the workload opted out of every reload. Invalid annotations get a
// Warning Event and are ignored.
func (c *Controller) observe(k key, obj any) (observed, bool) {
	a := obj.(metav1.Object).GetAnnotations()
	if a[wellknown.Reload] == "false" {
		return observed{}, false
	}
	if v, ok := a[wellknown.Reload]; ok && v != "true" {
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, ReasonInvalidAnnotation, fmt.Sprintf(
			"%s=%q is neither \"true\" nor \"false\", so it is ignored: this workload reloads only through %s or its inputs' %s",
			wellknown.Reload, v, wellknown.ReloadOn, wellknown.Reload))
	}
	all := c.opts.ReloadAll || a[wellknown.Reload] == "true"
	var named map[string]bool
	if s, ok := a[wellknown.ReloadOn]; ok {
		var perr error
		if named, perr = inputs.ParseReloadOn(s); perr != nil {
			c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, ReasonInvalidAnnotation, perr.Error()+"; those entries are ignored")
		}
	}
	o := observed{now: baseline{}, optional: map[string]bool{}}
	_, tmpl := workload.Of(obj)
	for _, ref := range inputs.Of(&tmpl.Spec) {
		in := c.lookup(ref.Kind, k.Namespace, ref.Name)
		if !(all || named[ref.ID()] || (in != nil && c.wantsReload(ref.Kind, in))) {
			continue
		}
		o.optional[ref.ID()] = ref.Optional
		if in != nil {
			o.now[ref.ID()] = consumedDigest(ref, in.entries)
		}
	}
	return o, true
}

// sync carries out the decision on one workload: at most one patch.
func (c *Controller) sync(ctx context.Context, k key) error {
	seen, _ := c.queue.Take(k)
	obj, ok, err := c.workloads[k.Kind].GetByKey(k.Namespace + "/" + k.Name)
	if err != nil || !ok {
		return err
	}
	o, ok := c.observe(k, obj)
	if !ok {
		return nil // opted out of every reload
	}
	w := obj.(metav1.Object)
	stored, hasBaseline := w.GetAnnotations()[wellknown.ConfigInputs]
	d := decide(stored, hasBaseline, o)
	if d.firstSight {
		c.metrics.skipped.WithLabelValues(skipFirstSight).Inc()
	}
	for _, id := range d.missing {
		c.metrics.skipped.WithLabelValues(skipMissing).Inc()
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, ReasonInputMissing, fmt.Sprintf(
			"%s is consumed by this workload but was deleted; courier made no rollout. Running pods keep what they have; new pods cannot start until it exists again", id))
	}
	if d.appeared {
		c.metrics.skipped.WithLabelValues(skipAppeared).Inc()
	}
	switch d.action {
	case writeNothing:
		return nil
	case writeBaseline:
		return c.write(ctx, k, w, o.now, nil)
	}
	if err := c.limiter.Wait(ctx); err != nil {
		return err
	}
	if err := c.write(ctx, k, w, o.now, d.changed); err != nil {
		c.metrics.reloads.WithLabelValues(k.Kind, "error").Inc()
		c.queue.Remember(k, seen) // the retry still measures from the change
		return err
	}
	c.metrics.reloads.WithLabelValues(k.Kind, "success").Inc()
	if !seen.IsZero() {
		c.metrics.latency.WithLabelValues(k.Kind).Observe(c.opts.Clock.Since(seen).Seconds())
	}
	reason := strings.Join(d.changed, ", ")
	c.logger.Info("reloaded", zap.Stringer("workload", k), zap.String("changed", reason))
	c.recorder.Event(obj.(runtime.Object), corev1.EventTypeNormal, ReasonReloaded, "rolled out because "+reason+" changed")
	return nil
}

// write patches the baseline, and with changed inputs, the rollout.
func (c *Controller) write(ctx context.Context, k key, w metav1.Object, now baseline, changed []string) error {
	annotations := map[string]string{wellknown.ConfigInputs: now.String()}
	hash := ""
	if len(changed) > 0 {
		annotations[wellknown.ReloadedFor] = strings.Join(changed, ", ")
		annotations[wellknown.ReloadedAt] = c.opts.Clock.Now().UTC().Format(time.RFC3339)
		hash = configHash(now)
	}
	data, err := patch(k.Kind, w.GetResourceVersion(), annotations, hash)
	if err != nil {
		return err
	}
	if err := workload.Patch(ctx, c.client, k.Kind, k.Namespace, k.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: wellknown.FieldManager}); err != nil {
		return fmt.Errorf("patch %s: %w", k, err)
	}
	return nil
}
