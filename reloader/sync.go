package reloader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/notify"
	"github.com/courier-k8s/courier/internal/stakater"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// Reasons in courier_reloader_skipped_total: a change seen that gave no rollout.
const (
	skipFirstSight = "first_sight"
	skipMissing    = "input_missing"
	skipAppeared   = "input_appeared"
	skipHeld       = "min_interval"
	skipOwnRollout = "template_changed"
	skipSuppressed = "suppressed"
	skipFinished   = "job_finished"
)

// resultNotified: in courier_reloader_reloads_total, a rollout told but not
// made (notify only).
const resultNotified = "notified"

// digestLen is how many hex characters of each input's digest the baseline
// keeps: 64 bits, ample to tell versions of one input apart, and small.
const digestLen = 16

// baseline maps input IDs ("secret/a") to the digest of their consumed content.
type baseline map[string]string

// String is the baseline's inputs in ID order, without the key's name.
func (b baseline) String() string { return b.encode("", "") }

// encode is courier.dev/config-inputs: the inputs in ID order and, with a
// keyed digester, the name of its key, and the installation that wrote it.
func (b baseline) encode(keyID, installation string) string {
	ids := make([]string, 0, len(b))
	for id := range b {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	parts := make([]string, 0, len(ids)+2)
	if keyID != "" {
		parts = append(parts, keyIDField+"="+keyID)
	}
	if installation != "" {
		parts = append(parts, installationField+"="+installation)
	}
	for _, id := range ids {
		parts = append(parts, id+"="+b[id])
	}
	return strings.Join(parts, ",")
}

// installationField is the baseline entry naming the installation (its
// namespace) that wrote it: the one that reloads the workload. Another
// installation leaves the workload alone while that one is there, so two
// couriers on one cluster never fight over a workload's baseline (each
// would find the other's key and start afresh) nor roll it out twice.
const installationField = "installation"

// installed reports whether a courier installation runs in namespace: its
// digest key is there (every installation writes one at its first start).
// One courier's cache may not hold another's key (a namespace it does not
// watch, a selector the key's labels do not match): only when its view
// says the key is gone is the installation gone (view.Confirm).
func (c *Controller) installed(ctx context.Context, namespace string) (bool, error) {
	if keys, _ := c.secrets.ByIndex(informers.Installations, namespace); len(keys) > 0 {
		return true, nil
	}
	a, err := c.opts.View.Confirm(ctx, c.opts.Finder, wellknown.KindSecret, namespace, KeySecret)
	return !a.Gone, err
}

// stored is what courier.dev/config-inputs says besides its inputs.
type stored struct {
	keyID, installation string
}

// parseBaseline reads courier.dev/config-inputs: the inputs, the name of
// the key their digests were made with ("" for a baseline of unkeyed
// digests) and the installation that wrote it ("" for one written before
// baselines named it). Entries it cannot read are dropped (they count as
// inputs appearing, which never rolls out).
func parseBaseline(s string) (baseline, stored) {
	b, st := baseline{}, stored{}
	for _, part := range strings.Split(s, ",") {
		id, d, ok := strings.Cut(strings.TrimSpace(part), "=")
		switch {
		case ok && id == keyIDField:
			st.keyID = d
		case ok && id == installationField:
			st.installation = d
		case ok && id != "" && d != "":
			b[id] = d
		}
	}
	return b, st
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
	obj     any // the cached object
	meta    metav1.Object
	entries []content.Entry
}

// lookup returns the consumed object kind namespace/name from the cache, or
// nil. Per-key digests of an object holding its values (a source) are
// computed once per resourceVersion, not once per consumer.
func (c *Controller) lookup(kind, namespace, name string) *input {
	obj := c.object(kind, namespace, name)
	if obj == nil {
		return nil
	}
	m := obj.(metav1.Object)
	if kind == wellknown.KindSecretProviderClass {
		return &input{obj: obj, meta: m, entries: reportEntries(obj.(*unstructured.Unstructured))}
	}
	if content.IsDigested(m) { // cheap: the digests are already there
		return &input{obj: obj, meta: m, entries: content.Entries(obj)}
	}
	c.mu.Lock()
	cached, ok := c.entries[m.GetUID()]
	c.mu.Unlock()
	if !ok || cached.resourceVersion != m.GetResourceVersion() {
		cached = cachedEntries{m.GetResourceVersion(), content.Entries(obj)}
		c.mu.Lock()
		c.entries[m.GetUID()] = cached
		c.mu.Unlock()
	}
	return &input{obj: obj, meta: m, entries: cached.entries}
}

type cachedEntries struct {
	resourceVersion string
	entries         []content.Entry
}

// object is the cached Secret or ConfigMap, or for a SecretProviderClass
// the report that set its content (see classState), or nil.
func (c *Controller) object(kind, namespace, name string) any {
	if kind == wellknown.KindSecretProviderClass {
		// Not before every report is known: a part could be stale.
		if c.providersSynced != nil && c.providersSynced() {
			if r := c.classState(informers.InputKey(kind, namespace, name)); r != nil {
				return r
			}
		}
		return nil
	}
	idx := c.secrets
	if kind == wellknown.KindConfigMap {
		idx = c.configMaps
	}
	obj, ok, err := idx.GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	return obj
}

// wantsReload reports whether m, or the source it was replicated from,
// carries courier.dev/reload: "true". It reads metadata only.
func (c *Controller) wantsReload(kind string, m metav1.Object) bool {
	return c.inputAnnotation(kind, m)(wellknown.Reload) == "true"
}

// inputAnnotation reads an annotation of the input m (nil: none), or, when
// m lacks it and is a replica, of the source m was replicated from.
func (c *Controller) inputAnnotation(kind string, m metav1.Object) func(key string) string {
	return func(key string) string {
		if m == nil {
			return ""
		}
		if v, ok := m.GetAnnotations()[key]; ok {
			return v
		}
		src, ok := m.GetAnnotations()[wellknown.Source]
		if !ok {
			return ""
		}
		ns, name, err := cache.SplitMetaNamespaceKey(src)
		if err != nil || ns == "" {
			return ""
		}
		s, ok := c.object(kind, ns, name).(metav1.Object)
		if !ok {
			return ""
		}
		return s.GetAnnotations()[key]
	}
}

// consumedEntries are the entries of obj (all: all of them) that ref
// consumes: every one, or its keys' — for an object the cache holds as a
// whole (more than content.MaxKeyDigests keys), what its key digests say of
// them, so a change to another key, or the consumed key gone, is told
// apart whatever the object's number of keys.
func consumedEntries(ref inputs.Ref, obj any, all []content.Entry) []content.Entry {
	if ref.All() || !isWhole(all) {
		return all
	}
	return content.KeyEntries(obj, ref.Keys)
}

// isWhole reports whether entries are one whole-content digest.
func isWhole(entries []content.Entry) bool { return len(entries) == 1 && entries[0].Whole }

// missingKeys are the keys ref consumes that entries lack (none when the
// object is held as one whole-content digest: consumed whole).
func missingKeys(ref inputs.Ref, entries []content.Entry) []string {
	if ref.All() || isWhole(entries) {
		return nil
	}
	have := make(map[string]bool, len(entries))
	for _, e := range entries {
		have[e.Key] = true
	}
	var out []string
	for _, k := range ref.Keys {
		if !have[k] {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// action is what one sync of a workload writes.
type action int

const (
	writeNothing  action = iota
	writeBaseline        // the baseline moved (first sight, inputs gone for good or new): no rollout
	dropBaseline         // nothing is opted in any more: the baseline is removed
	rollOut              // consumed content changed: a rollout, and the new baseline
)

// decision is the reloader's verdict on one workload.
type decision struct {
	action     action
	baseline   baseline // what to write (writeBaseline, rollOut)
	changed    []string // opted-in inputs whose consumed content changed (rollOut)
	missing    []string // consumed inputs or keys that are gone, non-optional: InputMissing
	appeared   bool     // inputs seen for the first time (never a rollout)
	firstSight bool     // no baseline yet: this sync writes the first one
	before     baseline // what the pods were given, as far as courier knows (rollOut)
	unchanged  bool     // the pod template already holds this content's hash: no rollout needed
}

// observed is a workload's opted-in inputs as the cache holds them now.
type observed struct {
	now      baseline        // the consumed digest of every opted-in input that exists
	optional map[string]bool // every opted-in input → whether its reference is optional
	// missingKeys: opted-in inputs that exist but lack keys a non-optional
	// reference consumes, with those keys.
	missingKeys map[string][]string
	// legacy: for inputs held as a whole (more than content.MaxKeyDigests
	// keys) of which some keys are consumed, the digest a baseline written
	// before courier kept their key digests holds for the same content.
	legacy       baseline
	templateHash string   // courier.dev/config-hash on the pod template now
	notifyOnly   bool     // courier.dev/reload: notify: say what would roll out, roll nothing
	digester     digester // what the digests in now were made with
	// previous: inputs that changed since the workload was created, by the
	// digest of what they held before (see hint), for those not in its
	// baseline: opting in with a change rolls that change out.
	previous baseline
	// selective: --resource-label-selector is set, so an input courier has
	// never seen may exist outside it: it holds nothing back (one seen
	// before and gone still does).
	selective bool
	// hidden: inputs in the baseline that the cache lacks but that exist
	// outside courier's view (relabelled out of the selector, or the
	// selector turned on since): not missing, they hold nothing back and
	// keep their recorded digest.
	hidden map[string]bool
	// err: a read by name failed, so what is missing is not known: the
	// sync is tried again rather than decided on a guess.
	err error
}

// decide compares what a workload consumes now with its stored baseline
// (stored, when hasBaseline). It reads nothing and writes nothing.
//
// The baseline records what the running pods were given. An input that is
// gone (deleted, or missing a consumed key) keeps its recorded digest, so
// when it is back with other content the workload rolls out, and with the
// same content nothing happens; while a non-optional one is gone nothing is
// written at all, for pods rolled out then could not start.
func decide(stored string, hasBaseline bool, o observed) decision {
	if len(o.optional) == 0 {
		if hasBaseline {
			return decision{action: dropBaseline} // opted out: the next opt-in starts afresh
		}
		return decision{} // nothing opted in: courier never writes to this workload
	}
	if !hasBaseline && len(o.previous) == 0 {
		return decision{action: writeBaseline, baseline: o.now, firstSight: true}
	}
	before := baseline{}
	if hasBaseline {
		before, _ = parseBaseline(stored)
	}
	for id, d := range o.previous {
		if _, ok := before[id]; !ok {
			before[id] = d
		}
	}
	upgraded := false
	for id, d := range o.legacy {
		if old, ok := before[id]; ok && old == d && o.now[id] != d {
			before[id], upgraded = o.now[id], true // the same content, recorded the old way
		}
	}
	next := baseline{}
	for id, d := range o.now {
		next[id] = d
	}
	var missing []string
	for id, optional := range o.optional {
		if _, ok := o.now[id]; ok || o.missingKeys[id] != nil {
			continue
		}
		old, seen := before[id]
		if seen {
			next[id] = old
		}
		if !optional && (seen || !o.selective) && !o.hidden[id] {
			missing = append(missing, id)
		}
	}
	for id, keys := range o.missingKeys {
		if old, seen := before[id]; seen {
			next[id] = old
		} else {
			delete(next, id)
		}
		missing = append(missing, fmt.Sprintf("%s (key %s)", id, strings.Join(keys, ", ")))
	}
	sort.Strings(missing)
	changed, _, appeared := diff(before, next)
	d := decision{baseline: next, missing: missing, appeared: len(appeared) > 0, firstSight: !hasBaseline}
	switch {
	case len(missing) > 0:
		// Hold everything until what the pods need is back.
	case len(changed) > 0 && o.digester.configHash(next) == o.templateHash:
		d.action, d.unchanged = writeBaseline, true // e.g. after a rollout undo and the content set back
	case len(changed) > 0:
		d.action, d.changed = rollOut, changed
		if !hasBaseline {
			d.before = before // the hint: what a held rollout keeps as the baseline
		}
	case !hasBaseline || next.String() != before.String() || upgraded:
		d.action = writeBaseline
	}
	return d
}

// observe reads the opted-in inputs of workload obj from the cache. A
// workload with courier.dev/reload: "false" has none. Invalid annotations get
// a Warning Event and are ignored.
//
// tmplObj is what holds the pod template: obj itself, or the Deployment a
// Rollout with spec.workloadRef takes its template from.
func (c *Controller) observe(ctx context.Context, k key, obj, tmplObj any, dg digester) observed {
	tmplAnnotations := workload.TemplateAnnotations(tmplObj)
	o := observed{now: baseline{}, optional: map[string]bool{}, missingKeys: map[string][]string{},
		templateHash: workload.HashOf(tmplObj), previous: baseline{}, legacy: baseline{}, digester: dg, selective: c.opts.View.Selective(),
		hidden: map[string]bool{}}
	w := obj.(metav1.Object)
	a := w.GetAnnotations()
	if tmplObj != obj {
		a = withOptIns(a, tmplObj.(metav1.Object).GetAnnotations())
	}
	inBaseline, _ := parseBaseline(a[wellknown.ConfigInputs])
	if a[wellknown.Reload] == "false" {
		return o
	}
	o.notifyOnly = a[wellknown.Reload] == wellknown.ReloadNotify
	if v, ok := a[wellknown.Reload]; ok && v != "true" && v != wellknown.ReloadNotify {
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInvalidAnnotation, fmt.Sprintf(
			"%s=%q is not \"true\", \"notify\" or \"false\", so it is ignored: this workload reloads only through %s or its inputs' %s",
			wellknown.Reload, v, wellknown.ReloadOn, wellknown.Reload))
	}
	if _, _, err := minInterval(k.Kind, w.GetAnnotations(), c.opts.Compat); err != nil {
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInvalidAnnotation, err.Error())
	}
	var named map[string]bool
	if s, ok := a[wellknown.ReloadOn]; ok {
		var perr error
		if named, perr = inputs.ParseReloadOn(s); perr != nil {
			c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInvalidAnnotation, perr.Error()+"; those entries are ignored")
		}
	}
	// A Job is recreated only when it opts in itself: never for
	// --reload-all, nor for an input's own courier.dev/reload (or, under
	// --compat, Reloader's auto-reload-all), for recreating one stops its
	// work and runs it again.
	job := k.Kind == workload.Job
	reloadAll := c.opts.ReloadAll && !job
	var badPatterns []string
	for _, ref := range workload.Inputs(tmplObj) {
		if ref.Kind == wellknown.KindSecretProviderClass && c.providerStatuses == nil {
			if named[ref.ID()] {
				c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInvalidAnnotation, fmt.Sprintf(
					"%s names %s, but courier runs without --reload-csi, so it does not read the Secrets Store CSI driver's reports and the class reloads nothing", wellknown.ReloadOn, ref.ID()))
			}
			continue // without --reload-csi, CSI volumes are no inputs
		}
		m, _ := c.object(ref.Kind, k.Namespace, ref.Name).(metav1.Object)
		verdict := stakater.Silent
		if c.opts.Compat {
			var bad []string
			verdict, bad = stakater.Decide(ref.Kind, ref.Name, a, tmplAnnotations, c.inputAnnotation(ref.Kind, m), reloadAll)
			badPatterns = append(badPatterns, bad...)
		}
		own := a[wellknown.Reload] == "true" || o.notifyOnly || named[ref.ID()] || (!job && m != nil && c.wantsReload(ref.Kind, m))
		switch {
		case ref.Named == wellknown.ReloadOn || (ref.Named != "" && verdict == stakater.Reload):
			// Named although the template does not reference it: only
			// the name (courier's, or Reloader's under --compat) opts in.
		case ref.Named != "" || !(own || verdict == stakater.Reload || (reloadAll && verdict != stakater.Blocked)):
			continue
		}
		o.optional[ref.ID()] = ref.Optional
		if m == nil {
			_, seen := inBaseline[ref.ID()]
			switch {
			case !seen:
			case ref.Kind == wellknown.KindSecretProviderClass:
				// Not known until every report is (a namespace courier may
				// list in again has not refilled yet): not missing.
				o.hidden[ref.ID()] = c.providersSynced == nil || !c.providersSynced()
			default:
				a, err := c.opts.View.Confirm(ctx, c.opts.Finder, ref.Kind, k.Namespace, ref.Name)
				o.hidden[ref.ID()] = !a.Gone // outside the view, or not in the cache yet
				o.err = errors.Join(o.err, err)
			}
			continue
		}
		in := c.lookup(ref.Kind, k.Namespace, ref.Name)
		entries := consumedEntries(ref, in.obj, in.entries)
		if keys := missingKeys(ref, entries); len(keys) > 0 && !ref.Optional {
			o.missingKeys[ref.ID()] = keys
			continue
		}
		o.now[ref.ID()] = dg.consumedDigest(ref, entries)
		if isWhole(in.entries) && !ref.All() {
			// What a baseline written before courier kept key digests of
			// such objects recorded: the whole content's.
			o.legacy[ref.ID()] = dg.consumedDigest(ref, in.entries)
		}
		if _, ok := inBaseline[ref.ID()]; !ok {
			if prev, ok := c.previous(informers.InputKey(ref.Kind, k.Namespace, ref.Name), w.GetUID()); ok {
				o.previous[ref.ID()] = dg.consumedDigest(ref, consumedEntries(ref, prev, content.Entries(prev)))
			}
		}
	}
	if len(badPatterns) > 0 {
		slices.Sort(badPatterns)
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInvalidAnnotation, fmt.Sprintf(
			"%s in a reloader.stakater.com reload list: not valid regular expressions, so they are ignored (courier reads each item as ^item$, as Reloader does)",
			strings.Join(slices.Compact(badPatterns), ", ")))
	}
	return o
}

// withOptIns is a Rollout's annotations (a) with the opt-ins (courier's,
// and Reloader's) it lacks taken from the Deployment holding its template
// (b): either may opt the pair in or out, the Rollout's word first.
func withOptIns(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	if out == nil {
		out = map[string]string{}
	}
	for _, key := range append([]string{wellknown.Reload, wellknown.ReloadOn}, stakater.Keys...) {
		if v, ok := b[key]; ok {
			if _, have := out[key]; !have {
				out[key] = v
			}
		}
	}
	return out
}

// sync carries out the decision on one workload: at most one patch (a
// Rollout with workloadRef: its Deployment's template, then its record).
func (c *Controller) sync(ctx context.Context, k key) error {
	seen, _ := c.queue.Take(k)
	if c.waitsForReplication(seen) {
		c.park(ctx, k, seen)
		return nil
	}
	if k.Kind == workload.Job && c.hasPending(k) {
		// Deleted to be recreated, and not created yet.
		created, err := c.createPending(ctx, k)
		if err != nil {
			c.queue.Remember(k, seen)
			return err
		}
		if created != nil {
			c.reloaded(k, created, strings.Split(created.Annotations[wellknown.ReloadedFor], ", "), seen)
		}
		return nil
	}
	info, ok := c.kind(k.Kind)
	if !ok {
		return nil // a custom kind no longer served
	}
	obj, ok, err := info.indexer.GetByKey(k.Namespace + "/" + k.Name)
	if err != nil || !ok {
		return err
	}
	w := obj.(metav1.Object)
	if k.Kind == workload.Deployment && c.opts.Pending != nil && c.opts.Pending() {
		return errPending
	}
	if len(c.referencing(k)) > 0 {
		return nil // the pod template of Rollouts (workloadRef): they reload it
	}
	tmplObj := obj
	var via metav1.Object // the Deployment holding a Rollout's template, which gets the rollout
	if ref := workload.RefOf(obj); ref != "" {
		deployments, _ := c.kind(workload.Deployment)
		d, ok, err := deployments.indexer.GetByKey(k.Namespace + "/" + ref)
		if err != nil || !ok {
			return err // nothing to reload until it exists (Argo Rollouts reports it)
		}
		tmplObj, via = d, d.(metav1.Object)
	}
	cons := consumer(w, via)
	if stop, err := c.madeAfterAll(ctx, k, info, obj.(runtime.Object), w, cons, tmplObj); stop || err != nil {
		return err
	}
	dg, ok := c.digester()
	if !ok {
		return fmt.Errorf("the digest key %s/%s is not there yet", c.opts.Namespace, KeySecret)
	}
	recorded, hasBaseline := w.GetAnnotations()[wellknown.ConfigInputs]
	_, st := parseBaseline(recorded)
	if hasBaseline && st.installation != "" && st.installation != c.opts.Namespace {
		if installed, err := c.installed(ctx, st.installation); err != nil || installed {
			return err // another installation reloads this workload
		}
	}
	compareWith := dg
	switch {
	case hasBaseline && st.keyID == "":
		compareWith = digester{} // written before digests were keyed: compare as written
	case hasBaseline && (st.keyID != dg.id || st.installation != c.opts.Namespace && st.installation != ""):
		// Another key (it was lost or replaced), or an installation that is
		// gone: start afresh, like first sight.
		hasBaseline = false
	}
	o := c.observe(ctx, k, obj, tmplObj, compareWith)
	if o.err != nil {
		c.queue.Remember(k, seen)
		return o.err
	}
	d := decide(recorded, hasBaseline, o)
	if compareWith.id != dg.id && d.action != dropBaseline && len(o.optional) > 0 {
		// Rewrite the baseline with keyed digests, once: no rollout unless
		// decide found a real change.
		if d.action != rollOut {
			d.action = writeBaseline
		}
		d.baseline = c.observe(ctx, k, obj, tmplObj, dg).now
	}
	if d.firstSight {
		c.metrics.skipped.WithLabelValues(skipFirstSight).Inc()
	}
	for _, id := range d.missing {
		c.metrics.skipped.WithLabelValues(skipMissing).Inc()
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInputMissing, fmt.Sprintf(
			"%s is consumed by this workload but is gone; courier rolls nothing out until it is back (then only if its content differs from what the pods were given). Running pods keep what they have; new pods cannot start until it exists again", id))
	}
	if d.appeared {
		c.metrics.skipped.WithLabelValues(skipAppeared).Inc()
	}
	if d.action != rollOut {
		c.forgetTemplate(cons.GetUID()) // the changes since the last sync are taken in
	}
	switch d.action {
	case writeNothing:
		return nil
	case writeBaseline:
		return c.write(ctx, k, info, w, via, dg, d.baseline, nil)
	case dropBaseline:
		return c.patch(ctx, k, info, w.GetResourceVersion(), map[string]any{wellknown.ConfigInputs: nil}, "")
	}
	if seen.IsZero() || c.opts.Clock.Since(seen) < c.opts.Debounce {
		// Not the end of a change's debounce (a resync, a retry, an edit
		// of the workload): wait for the rest of the window its inputs'
		// changes opened, and roll out what it gathered then.
		if wait, burst := c.debouncing(cons.GetUID()); wait > 0 {
			c.queue.Remember(k, seen)
			c.queue.AddAfter(k, wait, burst)
			return nil
		}
	}
	if c.ownRollout(w, tmplObj, via) {
		// The owner changed the pod template after the inputs changed (a
		// Helm upgrade or kubectl apply of both): its rollout starts pods
		// that read the new content, so courier's would be a second one.
		c.metrics.skipped.WithLabelValues(skipOwnRollout).Inc()
		c.logger.Info("not rolled out: the pod template changed after its inputs did, so the workload's own rollout gives the new pods the new content",
			zap.Stringer("workload", k), zap.Strings("changed", d.changed))
		if err := c.write(ctx, k, info, w, via, dg, d.baseline, nil); err != nil {
			return err
		}
		c.forgetTemplate(cons.GetUID())
		return nil
	}
	if k.Kind == workload.Job {
		switch {
		case w.GetDeletionTimestamp() != nil:
			return nil // going away: nothing to recreate
		case workload.NeverStarted(obj):
			// Suspended since its creation: no pod of it has read the old
			// content, and the ones it starts read the new.
			return c.write(ctx, k, info, w, via, dg, d.baseline, nil)
		case workload.Finished(obj) && w.GetAnnotations()[wellknown.ReloadFinished] != "true":
			// Its work is done: recreating it would run it again. Nothing
			// is written, so if it asks later, the change is still to roll out.
			c.metrics.skipped.WithLabelValues(skipFinished).Inc()
			c.recorder.Event(obj.(runtime.Object), corev1.EventTypeNormal, wellknown.ReasonJobFinished, fmt.Sprintf(
				"%s changed, but this Job has finished, so courier does not recreate it (that would run it again); annotate it %s: \"true\" to have it recreated for such changes",
				strings.Join(d.changed, ", "), wellknown.ReloadFinished))
			return c.keepPending(ctx, k, info, w, via, dg, d)
		}
	}
	if until, ok := c.suppressed(k, d.changed); ok {
		// Nothing is written: the baseline stays what the pods were given,
		// so when the storm ends one rollout carries the last content.
		c.metrics.skipped.WithLabelValues(skipSuppressed).Inc()
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonReloadSuppressed, fmt.Sprintf(
			"%s changed, but changes too often to roll out for (--reload-storm-changes=%d within --reload-storm-window=%s): nothing rolls out until it is quiet, %s at the earliest; then one rollout, if what this workload consumes differs from what it runs",
			strings.Join(d.changed, ", "), c.opts.StormChanges, c.opts.StormWindow, until.UTC().Format(time.RFC3339)))
		c.queue.AddAfter(k, until.Sub(c.opts.Clock.Now())+100*time.Millisecond, time.Time{}) // its latency is not the reloader's
		return c.keepPending(ctx, k, info, w, via, dg, d)
	}
	if o.notifyOnly || c.opts.NotifyOnly {
		return c.notifyOnly(ctx, k, info, obj.(runtime.Object), w, via, dg, d, o.notifyOnly)
	}
	if c.held(k, obj.(runtime.Object), w, d.changed) {
		return c.keepPending(ctx, k, info, w, via, dg, d)
	}
	if err := c.limiter.Wait(ctx); err != nil {
		return err
	}
	if k.Kind == workload.Job {
		created, err := c.recreate(ctx, k, w, c.record(dg, d.baseline, d.changed), dg.configHash(d.baseline))
		if err != nil {
			c.metrics.reloads.WithLabelValues(k.Kind, "error").Inc()
			c.queue.Remember(k, seen)
			return err
		}
		if created != nil {
			c.reloaded(k, created, d.changed, seen)
		}
		return nil
	}
	if err := c.write(ctx, k, info, w, via, dg, d.baseline, d.changed); errors.Is(err, errNotStored) {
		// Trying again cannot help: say what to fix, once per change.
		c.metrics.reloads.WithLabelValues(k.Kind, "error").Inc()
		msg := fmt.Sprintf("%s changed, but %s written into %s was not kept: this kind's schema has no such field, so the API server dropped it and its operator sees nothing. Give --reload-resources a field path the CRD allows (or none, for metadata.annotations)",
			strings.Join(d.changed, ", "), wellknown.ConfigHash, strings.Join(info.hashPath, "."))
		c.logger.Error("reload not stored", zap.Stringer("workload", k), zap.String("reason", msg))
		c.recorder.Event(obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonHashNotStored, msg)
		return nil
	} else if err != nil {
		c.metrics.reloads.WithLabelValues(k.Kind, "error").Inc()
		c.queue.Remember(k, seen) // the retry still measures from the change
		c.unanswered(w.GetUID(), err, unansweredRollout{hash: dg.configHash(d.baseline), record: c.record(dg, d.baseline, d.changed),
			changed: d.changed, seen: seen, rv: cons.GetResourceVersion()})
		return err
	}
	c.forgetTemplate(cons.GetUID())
	c.forgetLost(w.GetUID()) // the rollout's hash was written against the version the failed ones were
	c.reloaded(k, obj.(runtime.Object), d.changed, seen)
	return nil
}

// reloaded tells of a rollout made: metrics, log, an Event on obj (for a
// Job, the new one) and a notification.
func (c *Controller) reloaded(k key, obj runtime.Object, changed []string, seen time.Time) {
	c.metrics.reloads.WithLabelValues(k.Kind, "success").Inc()
	if !seen.IsZero() {
		c.metrics.latency.WithLabelValues(k.Kind).Observe(c.opts.Clock.Since(seen).Seconds())
	}
	reason := strings.Join(changed, ", ")
	c.logger.Info("reloaded", zap.Stringer("workload", k), zap.String("changed", reason))
	msg := "rolled out because " + reason + " changed"
	if k.Kind == workload.Job {
		msg = "recreated because " + reason + " changed (a Job's pod template cannot change: the old Job and its pods were deleted, and this one started afresh)"
	}
	c.recorder.Event(obj, corev1.EventTypeNormal, wellknown.ReasonReloaded, msg)
	c.opts.Notifier.Notify(notify.Rollout{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Changed: slices.Clone(changed), At: c.opts.Clock.Now().UTC().Truncate(time.Second)})
}

// ownRollout reports whether workload w's pod template (in tmplObj) is no
// longer what it was when the first of the input changes now to roll out
// was seen: someone else changed it since, which rolls the workload out
// with pods that read the new content. A template changed first, before the
// inputs, is no such rollout: pods it started may hold the old content, so
// courier rolls out. What courier has not seen change (a restart between
// the changes) it rolls out too. A Rollout taking its template from a
// Deployment (via) is left to the rule's default: courier rolls out.
func (c *Controller) ownRollout(w metav1.Object, tmplObj any, via metav1.Object) bool {
	o, ok := tmplObj.(*workload.Object)
	if via != nil || !ok || o.TemplateSum == 0 {
		return false
	}
	before, seen := c.templateBefore(w.GetUID())
	return seen && before != o.TemplateSum
}

// suppressed reports whether every input in changed (IDs, in k's
// namespace) is in a storm (see storms), and when the last of them is quiet.
func (c *Controller) suppressed(k key, changed []string) (time.Time, bool) {
	now := c.opts.Clock.Now()
	var until time.Time
	for _, id := range changed {
		ref := inputs.RefOf(id)
		in, quiet := c.storms.suppressed(informers.InputKey(ref.Kind, k.Namespace, ref.Name), now)
		if !in {
			return time.Time{}, false // this one rolls out, and takes the others along
		}
		if quiet.After(until) {
			until = quiet
		}
	}
	return until, len(changed) > 0
}

// notifyOnly is a rollout not made: the workload (annotated, when
// annotated; else --reload-mode=notify) only wants to know. The baseline
// takes the change in, so each change is told once; an Event and a
// notification say what would have rolled out and why. Nothing restarts.
func (c *Controller) notifyOnly(ctx context.Context, k key, info kindInfo, obj runtime.Object, w, via metav1.Object, dg digester, d decision, annotated bool) error {
	why := "--reload-mode=notify"
	if annotated {
		why = wellknown.Reload + "=" + wellknown.ReloadNotify
	}
	if err := c.write(ctx, k, info, w, via, dg, d.baseline, nil); err != nil {
		c.unanswered(w.GetUID(), err, unansweredRollout{record: c.record(dg, d.baseline, nil), changed: d.changed,
			rv: w.GetResourceVersion(), notifyOnly: why})
		return err
	}
	c.forgetTemplate(consumer(w, via).GetUID())
	c.notified(k, obj, d.changed, why)
	return nil
}

// notified tells of a rollout not made (notifyOnly, for why): metrics,
// log, an Event on obj and a notification.
func (c *Controller) notified(k key, obj runtime.Object, changed []string, why string) {
	reason := strings.Join(changed, ", ")
	c.metrics.reloads.WithLabelValues(k.Kind, resultNotified).Inc()
	c.logger.Info("would roll out; notified only", zap.Stringer("workload", k), zap.String("changed", reason), zap.String("why", why))
	c.recorder.Event(obj, corev1.EventTypeNormal, wellknown.ReasonReloadNotified, fmt.Sprintf(
		"would roll out because %s changed; not rolled out (%s): restart it yourself when ready", reason, why))
	c.opts.Notifier.Notify(notify.Rollout{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, Changed: slices.Clone(changed),
		At: c.opts.Clock.Now().UTC().Truncate(time.Second), NotifyOnly: true})
}

// held reports whether the rollout of k for changed must wait for its
// minimum interval since the last one (courier.dev/reload-min-interval). It
// then writes nothing, not even the baseline, so every change made until the
// interval ends rolls out with it, once; k is queued again for that time.
// The interval is measured from courier.dev/reloaded-at, on the workload, so
// a restart or a new leader holds the same rollout just as long.
func (c *Controller) held(k key, obj runtime.Object, w metav1.Object, changed []string) bool {
	interval, annotation, _ := minInterval(k.Kind, w.GetAnnotations(), c.opts.Compat) // an invalid one: observe said so
	last := w.GetAnnotations()[wellknown.ReloadedAt]
	now := c.opts.Clock.Now()
	until := heldUntil(last, interval, now)
	if until.IsZero() {
		return false
	}
	c.metrics.skipped.WithLabelValues(skipHeld).Inc()
	c.logger.Info("rollout held back by the minimum interval", zap.Stringer("workload", k), zap.Strings("changed", changed), zap.Time("until", until))
	c.recorder.Event(obj, corev1.EventTypeNormal, wellknown.ReasonReloadDelayed, fmt.Sprintf(
		"%s changed within %s=%s of the last rollout (%s): it rolls out at %s, once, with every change made until then",
		strings.Join(changed, ", "), annotation, interval, last, until.UTC().Format(time.RFC3339)))
	c.queue.AddAfter(k, until.Sub(now), time.Time{}) // its latency is not the reloader's
	return true
}

// keepPending leaves a rollout that must wait (held, suppressed) pending:
// nothing is written, so the baseline still says what the pods were given.
// Only a workload without a baseline, whose rollout rests on the hint of what
// its inputs held before (gone after hintTTL), gets that as its baseline now.
func (c *Controller) keepPending(ctx context.Context, k key, info kindInfo, w, via metav1.Object, dg digester, d decision) error {
	if !d.firstSight {
		return nil
	}
	return c.write(ctx, k, info, w, via, dg, d.before, nil)
}

// write patches the baseline, and with changed inputs, the rollout: into
// the workload, or into via, the Deployment holding its pod template. For
// a Rollout with workloadRef and a custom kind without a pod template, the
// hash goes first and alone; if the record then fails to be written, the
// rollout has happened without its record and Event.
func (c *Controller) write(ctx context.Context, k key, info kindInfo, w, via metav1.Object, dg digester, now baseline, changed []string) error {
	annotations := c.record(dg, now, changed)
	hash := ""
	if len(changed) > 0 {
		hash = dg.configHash(now)
	}
	if hash != "" && (via != nil || info.hashApart) {
		// First the hash alone: into the Deployment holding the pod
		// template, or where a custom kind's field path says (checked:
		// a pruned hash writes nothing else, so the change is not
		// consumed). Then the record, which must not be lost to a
		// conflict with the operator's own writes (a retry would find the
		// hash in place and record no rollout), so it is written to
		// whatever version is there.
		hk, hinfo, hobj := k, info, w
		if via != nil {
			hinfo, _ = c.kind(workload.Deployment)
			hk, hobj = key{Kind: workload.Deployment, Namespace: k.Namespace, Name: via.GetName()}, via
		}
		if err := c.patch(ctx, hk, hinfo, hobj.GetResourceVersion(), map[string]any{}, hash); err != nil {
			return err
		}
		c.wroteAgainst(w.GetUID(), hobj.GetResourceVersion())
		return c.patch(ctx, k, info, "", annotations, "")
	}
	if err := c.patch(ctx, k, info, w.GetResourceVersion(), annotations, hash); err != nil {
		return err
	}
	c.wroteAgainst(w.GetUID(), w.GetResourceVersion())
	return nil
}

// record is courier's annotations on a workload given now as its baseline
// and, with changed inputs, rolled out for them.
func (c *Controller) record(dg digester, now baseline, changed []string) map[string]any {
	annotations := map[string]any{wellknown.ConfigInputs: now.encode(dg.id, c.opts.Namespace)}
	if len(changed) > 0 {
		annotations[wellknown.ReloadedFor] = strings.Join(changed, ", ")
		annotations[wellknown.ReloadedAt] = c.opts.Clock.Now().UTC().Format(time.RFC3339)
	}
	return annotations
}

// patch sends the workload courier's annotations (nil removes one) and, with
// a hash, the rollout.
func (c *Controller) patch(ctx context.Context, k key, info kindInfo, resourceVersion string, annotations map[string]any, hash string) error {
	data, err := patch(info.hashPath, resourceVersion, annotations, hash)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: wellknown.FieldManager}
	if info.gvr == nil {
		if err := workload.Patch(ctx, c.client, k.Kind, k.Namespace, k.Name, types.MergePatchType, data, opts); err != nil {
			return fmt.Errorf("patch %s: %w", k, err)
		}
		return nil
	}
	u, err := c.opts.Dynamic.Resource(*info.gvr).Namespace(k.Namespace).Patch(ctx, k.Name, types.MergePatchType, data, opts)
	if err != nil {
		return fmt.Errorf("patch %s: %w", k, err)
	}
	if got, _, _ := unstructured.NestedString(u.Object, append(slices.Clone(info.hashPath), wellknown.ConfigHash)...); hash != "" && got != hash {
		return errNotStored
	}
	return nil
}

// errPending: Rollouts are not known in full yet (Options.Pending); the
// Deployment is synced again after a backoff.
var errPending = errors.New("waiting for the Rollouts cache")

// errNotStored: the API server took a custom resource's patch but did not
// keep courier.dev/config-hash where its kind's field path says (its CRD's
// schema has no such field, and pruned it).
var errNotStored = errors.New("the hash was not stored")
