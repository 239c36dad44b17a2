package reloader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/content"
	"github.com/courier-k8s/courier/internal/inputs"
	"github.com/courier-k8s/courier/internal/stakater"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// gather reads what the decision on workload k needs, from the caches and
// the per-process state, into facts; nil when there is nothing to decide on
// (the workload, its kind or the Deployment holding its pod template is not
// there). It stops reading at a fact that decides alone (the policies
// before the comparison). Without waves, it does not read what a rollout
// wave waits for (the workloads of earlier waves).
func (c *Controller) gather(ctx context.Context, k key, seen time.Time, waves bool) (*facts, error) {
	f := &facts{key: k, seen: seen, now: c.opts.Clock.Now(), keyNamespace: c.opts.Namespace}
	if f.replicating = c.waitsForReplication(seen); f.replicating {
		return f, nil
	}
	if f.pendingJob = k.Kind == workload.Job && c.hasPending(k); f.pendingJob {
		return f, nil
	}
	info, ok := c.kind(k.Kind)
	if !ok {
		return nil, nil // a custom kind no longer served
	}
	obj, ok, err := info.indexer.GetByKey(k.Namespace + "/" + k.Name)
	if err != nil || !ok {
		return nil, err
	}
	if k.Kind == workload.Deployment && c.opts.Pending != nil && c.opts.Pending() {
		return nil, errPending
	}
	f.info, f.obj, f.w, f.tmplObj = info, obj, obj.(metav1.Object), obj
	if f.rolloutOwned = len(c.referencing(k)) > 0; f.rolloutOwned {
		return f, nil
	}
	if ref := workload.RefOf(obj); ref != "" {
		deployments, _ := c.kind(workload.Deployment)
		d, ok, err := deployments.indexer.GetByKey(k.Namespace + "/" + ref)
		if err != nil || !ok {
			return nil, err // nothing to reload until it exists (Argo Rollouts reports it)
		}
		f.tmplObj, f.via = d, d.(metav1.Object)
	}
	f.cons = consumer(f.w, f.via)
	c.gatherComparison(ctx, f)
	if f.noKey || f.otherInstallation || f.installationErr != nil || f.observed.err != nil {
		return f, nil
	}
	f.debounce = c.opts.Debounce
	f.debounceWait, f.burst = c.debouncing(f.cons.GetUID())
	f.templateChanged = c.ownRollout(f.w, f.tmplObj, f.via)
	if k.Kind == workload.Job {
		f.job = jobState{deleting: f.w.GetDeletionTimestamp() != nil, neverStarted: workload.NeverStarted(obj),
			finished: workload.Finished(obj), reloadFinished: f.w.GetAnnotations()[wellknown.ReloadFinished] == "true"}
	}
	f.stormChanges, f.stormWindow, f.storms = c.opts.StormChanges, c.opts.StormWindow, map[string]stormState{}
	for id := range f.observed.optional {
		ref := inputs.RefOf(id)
		in, quiet := c.storms.suppressed(informers.InputKey(ref.Kind, k.Namespace, ref.Name), f.now)
		f.storms[id] = stormState{in: in, quiet: quiet}
	}
	f.notifyMode = c.opts.NotifyOnly
	f.interval, f.intervalKey, _ = minInterval(k.Kind, f.w.GetAnnotations(), c.opts.Compat) // an invalid one: observe said so
	f.reloadedAt = f.w.GetAnnotations()[wellknown.ReloadedAt]
	var werr error
	if f.wave, werr = waveOf(f.w.GetAnnotations(), c.opts.Compat); werr != nil {
		f.observed.warnings = append(f.observed.warnings, werr.Error())
	}
	if !waves {
		return f, nil
	}
	if f.wave <= 0 && c.budget.max == 0 {
		return f, nil // nothing to wait for: no need to compare twice
	}
	if d := comparison(f); d.action == rollOut {
		if f.wave > 0 {
			f.waveTimeout = c.opts.WaveTimeout
			f.waitingSince, f.haltedBy = c.waiting.since(k, targetOf(verdict{d: &d}), f.now)
			if err := c.gatherWaves(ctx, f, d.changed); err != nil {
				return nil, err
			}
		}
		if f.maxInFlight = c.budget.max; f.maxInFlight > 0 {
			f.slot = c.budget.room(k, f.wave, f.seen, "", false)
		}
	}
	return f, nil
}

// gatherComparison reads the baseline, whose installation and key it was
// written with, and the inputs as the cache holds them now.
func (c *Controller) gatherComparison(ctx context.Context, f *facts) {
	dg, ok := c.digester()
	if f.noKey = !ok; f.noKey {
		return
	}
	f.dg = dg
	f.recorded, f.hasBaseline = f.w.GetAnnotations()[wellknown.ConfigInputs]
	_, st := parseBaseline(f.recorded)
	if f.hasBaseline && st.installation != "" && st.installation != c.opts.Namespace {
		installed, err := c.installed(ctx, st.installation)
		if f.otherInstallation, f.installationErr = installed, err; installed || err != nil {
			return // another installation reloads this workload
		}
	}
	compareWith := dg
	switch {
	case f.hasBaseline && st.keyID == "":
		compareWith = digester{} // written before digests were keyed: compare as written
	case f.hasBaseline && (st.keyID != dg.id || st.installation != c.opts.Namespace && st.installation != ""):
		// Another key (it was lost or replaced), or an installation that is
		// gone: start afresh, like first sight.
		f.hasBaseline = false
	}
	f.observed = c.observe(ctx, f.key, f.obj, f.tmplObj, compareWith)
	if f.rekey = compareWith.id != dg.id; f.rekey && f.observed.err == nil {
		f.keyed = c.observe(ctx, f.key, f.obj, f.tmplObj, dg).now
	}
}

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

// input is a consumed object as seen in the cache.
type input struct {
	obj     any // the cached object
	meta    metav1.Object
	entries []content.Entry
}

// inputOf is obj, a cached object of kind (object), as an input. Per-key
// digests of an object holding its values (a source) are computed once per
// resourceVersion, not once per consumer; an object the cache holds the
// metadata of only (a workload started consuming it after the cache last
// saw it change: content.MetadataOnly) is read (Options.Read) once per
// resourceVersion, or for a newer one the cache has yet to see, digested,
// and only its digests are kept.
func (c *Controller) inputOf(ctx context.Context, kind string, obj any) (*input, error) {
	m := obj.(metav1.Object)
	if kind == wellknown.KindSecretProviderClass {
		return &input{obj: obj, meta: m, entries: reportEntries(obj.(*unstructured.Unstructured))}, nil
	}
	if content.IsDigested(m) && content.Read(m) { // its digests are already there (Entries only hex-encodes them)
		return &input{obj: obj, meta: m, entries: content.Entries(obj)}, nil
	}
	read := !content.Read(m)
	c.mu.Lock()
	cached, ok := c.entries[m.GetUID()]
	c.mu.Unlock()
	if ok && (cached.resourceVersion == m.GetResourceVersion() || read && newerVersion(cached.resourceVersion, m.GetResourceVersion())) {
		if cached.read == nil {
			return &input{obj: obj, meta: m, entries: cached.entries}, nil
		}
		return &input{obj: cached.read, meta: m, entries: cached.entries}, nil
	}
	before := cached
	cached = cachedEntries{resourceVersion: m.GetResourceVersion()}
	held := obj
	if read {
		r, err := c.read(ctx, kind, m)
		if err != nil {
			return nil, err
		}
		held, cached.read, cached.resourceVersion = r, r, r.(metav1.Object).GetResourceVersion()
	}
	cached.entries = content.Entries(held)
	if read && ok && before.read != nil && content.Hash(before.entries) != content.Hash(cached.entries) {
		// A change of an input courier holds the metadata of only is seen
		// here, when a consumer reads it, not when the cache sees it
		// (the update handler cannot tell a content change from another).
		c.countChange(informers.InputKey(kind, m.GetNamespace(), m.GetName()), m, c.opts.Clock.Now())
	}
	c.mu.Lock()
	c.entries[m.GetUID()] = cached
	c.mu.Unlock()
	// Deleted meanwhile (its delete handler may have run before the entry
	// was stored): the entry goes with it.
	if now, _ := c.object(kind, m.GetNamespace(), m.GetName()).(metav1.Object); now == nil || now.GetUID() != m.GetUID() {
		c.forget(m.GetUID())
	}
	return &input{obj: held, meta: m, entries: cached.entries}, nil
}

// holdsRead reports whether courier read the input uid since it started.
func (c *Controller) holdsRead(uid types.UID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.entries[uid]
	return ok
}

// forget drops what was computed or read of the input uid.
func (c *Controller) forget(uid types.UID) {
	c.mu.Lock()
	delete(c.entries, uid)
	c.mu.Unlock()
}

// read reads the input m, which the cache holds the metadata of only, and
// returns its digests (content.DigestObject: none of its values is kept).
// An object the cache does not speak for yet (gone or replaced since) is an
// error: the workload is synced again, once the cache has caught up.
func (c *Controller) read(ctx context.Context, kind string, m metav1.Object) (any, error) {
	if c.opts.Read == nil {
		return nil, fmt.Errorf("%s %s/%s: courier holds no digests of it and cannot read it", kind, m.GetNamespace(), m.GetName())
	}
	c.metrics.reads.Inc()
	obj, err := c.opts.Read(ctx, kind, m.GetNamespace(), m.GetName())
	if err != nil {
		return nil, fmt.Errorf("read %s %s/%s, which a workload consumes: %w", kind, m.GetNamespace(), m.GetName(), err)
	}
	if obj == nil || obj.(metav1.Object).GetUID() != m.GetUID() {
		return nil, fmt.Errorf("%s %s/%s is gone or replaced since courier's cache saw it; retried once the cache catches up", kind, m.GetNamespace(), m.GetName())
	}
	return content.DigestObject(obj, false), nil
}

type cachedEntries struct {
	resourceVersion string
	entries         []content.Entry
	// read is the digests of an object read (read), at resourceVersion;
	// nil for a cached object's own entries (one holding its values).
	read any
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

// observe reads the opted-in inputs of workload obj from the cache. A
// workload with courier.dev/reload: "false" has none. Invalid annotations
// are ignored, each with a warning (told by act).
//
// tmplObj is what holds the pod template: obj itself, or the Deployment a
// Rollout with spec.workloadRef takes its template from.
func (c *Controller) observe(ctx context.Context, k key, obj, tmplObj any, dg digester) observed {
	tmplAnnotations := workload.TemplateAnnotations(tmplObj)
	o := observed{now: baseline{}, optional: map[string]bool{}, missingKeys: map[string][]string{},
		templateHash: workload.HashOf(tmplObj), previous: baseline{}, legacy: baseline{}, digester: dg, selective: c.opts.View.Selective(),
		hidden: map[string]bool{}, versions: versions{}}
	w := obj.(metav1.Object)
	a := w.GetAnnotations()
	if tmplObj != obj {
		a = withOptIns(a, tmplObj.(metav1.Object).GetAnnotations())
	}
	inBaseline, st := parseBaseline(a[wellknown.ConfigInputs])
	var recorded versions
	if st.keyID == dg.id { // the baseline's digests are dg's: one of a recorded version may stand
		recorded = parseVersions(a[wellknown.ConfigVersions], a[wellknown.ConfigInputs])
	}
	if a[wellknown.Reload] == "false" {
		return o
	}
	o.notifyOnly = a[wellknown.Reload] == wellknown.ReloadNotify
	if v, ok := a[wellknown.Reload]; ok && v != "true" && v != wellknown.ReloadNotify {
		o.warnings = append(o.warnings, fmt.Sprintf(
			"%s=%q is not \"true\", \"notify\" or \"false\", so it is ignored: this workload reloads only through %s or its inputs' %s",
			wellknown.Reload, v, wellknown.ReloadOn, wellknown.Reload))
	}
	if _, _, err := minInterval(k.Kind, w.GetAnnotations(), c.opts.Compat); err != nil {
		o.warnings = append(o.warnings, err.Error())
	}
	var named map[string]bool
	if s, ok := a[wellknown.ReloadOn]; ok {
		var perr error
		if named, perr = inputs.ParseReloadOn(s); perr != nil {
			o.warnings = append(o.warnings, perr.Error()+"; those entries are ignored")
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
				o.warnings = append(o.warnings, fmt.Sprintf(
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
		c.observeInput(ctx, &o, k, w.GetUID(), ref, m, inBaseline, recorded)
	}
	if len(badPatterns) > 0 {
		slices.Sort(badPatterns)
		o.warnings = append(o.warnings, fmt.Sprintf(
			"%s in a reloader.stakater.com reload list: not valid regular expressions, so they are ignored (courier reads each item as ^item$, as Reloader does)",
			strings.Join(slices.Compact(badPatterns), ", ")))
	}
	return o
}

// observeInput reads one opted-in input, m as cached (nil: the cache lacks
// it), of workload k (its UID uid) into o. An input the cache holds
// the metadata of only, at the version its baseline digest was made of
// (recorded), is not read: that digest is its digest.
func (c *Controller) observeInput(ctx context.Context, o *observed, k key, uid types.UID, ref inputs.Ref, m metav1.Object, inBaseline baseline, recorded versions) {
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
		return
	}
	metadataOnly := content.IsDigested(m) && !content.Read(m)
	if metadataOnly && !c.holdsRead(m.GetUID()) {
		if ver, d := recorded[ref.ID()], inBaseline[ref.ID()]; ver != "" && d != "" && ver == versionOf(ref, m.GetUID(), m.GetResourceVersion()) {
			o.now[ref.ID()], o.versions[ref.ID()] = d, ver
			return
		}
	}
	// m itself, not the cache read again: the input may have gone from
	// the cache since (a nil input crashed courier in make test's soak).
	in, err := c.inputOf(ctx, ref.Kind, m)
	if err != nil {
		o.err = errors.Join(o.err, err)
		return
	}
	if metadataOnly {
		if ver := versionOf(ref, m.GetUID(), in.obj.(metav1.Object).GetResourceVersion()); ver != "" {
			o.versions[ref.ID()] = ver
		}
	}
	entries := consumedEntries(ref, in.obj, in.entries)
	if keys := missingKeys(ref, entries); len(keys) > 0 && !ref.Optional {
		o.missingKeys[ref.ID()] = keys
		return
	}
	o.now[ref.ID()] = o.digester.consumedDigest(ref, entries)
	if isWhole(in.entries) && !ref.All() {
		// What a baseline written before courier kept key digests of
		// such objects recorded: the whole content's.
		o.legacy[ref.ID()] = o.digester.consumedDigest(ref, in.entries)
	}
	if _, ok := inBaseline[ref.ID()]; !ok {
		if prev, ok := c.previous(ctx, k, uid, ref.Kind, ref.Name); ok {
			o.previous[ref.ID()] = o.digester.consumedDigest(ref, consumedEntries(ref, prev, content.Entries(prev)))
		}
	}
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
