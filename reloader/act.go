package reloader

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/courier-k8s/courier/informers"
	"github.com/courier-k8s/courier/internal/notify"
	"github.com/courier-k8s/courier/internal/objmeta"
	"github.com/courier-k8s/courier/internal/wellknown"
	"github.com/courier-k8s/courier/internal/workload"
)

// act carries out verdict v on the workload of facts f: first what earlier
// syncs left unanswered (madeAfterAll), then the write the verdict names,
// with everything told of it (tell) and the requeue. Lost answers are
// recorded here (unanswered) and nowhere else.
func (c *Controller) act(ctx context.Context, f *facts, v verdict) error {
	k := f.key
	if f.cons != nil {
		if stop, err := c.madeAfterAll(ctx, k, f.info, f.obj.(runtime.Object), f.w, f.cons, f.tmplObj); stop || err != nil {
			return err
		}
	}
	switch {
	case v.hold != nil && v.hold.slot:
		c.letGo(c.budget.wait(k, f.wave, f.seen))
	case v.do != doRollOut:
		c.budget.leave(k)
	}
	if news, halts := c.waiting.set(k, f.seen, f.now, v); !news {
		v.event, v.skip = "", "" // a wait or a halt is told once, not at each move of the workloads it waits for
	} else {
		c.haltedInputs(halts, v.inputMessage)
	}
	c.tell(f, v)
	if v.after > 0 {
		c.queue.AddAfter(k, v.after, v.from)
	}
	switch v.do {
	case doNothing:
		return nil
	case doFail:
		return v.err
	case doRetry:
		c.queue.Remember(k, f.seen) // the retry still measures from the change
		return v.err
	case doPark:
		c.park(ctx, k, f.seen)
		return nil
	case doCreateJob:
		created, err := c.createPending(ctx, k)
		if err != nil {
			c.queue.Remember(k, f.seen)
			return err
		}
		if created != nil {
			c.reloaded(k, created, strings.Split(created.Annotations[wellknown.ReloadedFor], ", "), f.seen)
		}
		return nil
	case doWriteBaseline:
		if _, err := c.write(ctx, f, v.d.baseline, nil); err != nil || !v.forget {
			return err
		}
		c.forgetTemplate(f.cons.GetUID())
		return nil
	case doDropBaseline:
		return c.patch(ctx, k, f.info, f.w.GetResourceVersion(), map[string]any{wellknown.ConfigInputs: nil, wellknown.ConfigVersions: nil}, "")
	case doWait:
		c.queue.Remember(k, f.seen)
		return nil
	case doKeepPending:
		return c.keepPending(ctx, f, *v.d)
	case doNotify:
		return c.notifyOnly(ctx, f, *v.d, v.why)
	}
	return c.rollOut(ctx, f, *v.d)
}

// tell emits what verdict v says besides its write: the warnings about the
// workload's annotations, what the comparison found (first sight, inputs
// missing or appeared), and the verdict's own metric, log line and Event.
func (c *Controller) tell(f *facts, v verdict) {
	for _, msg := range f.observed.warnings {
		c.recorder.Event(f.obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInvalidAnnotation, msg)
	}
	if d := v.d; d != nil {
		if d.firstSight {
			c.metrics.skipped.WithLabelValues(skipFirstSight).Inc()
		}
		for _, id := range d.missing {
			c.metrics.skipped.WithLabelValues(skipMissing).Inc()
			c.recorder.Event(f.obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonInputMissing, fmt.Sprintf(
				"%s is consumed by this workload but is gone; courier rolls nothing out until it is back (then only if its content differs from what the pods were given). Running pods keep what they have; new pods cannot start until it exists again", id))
		}
		if d.appeared {
			c.metrics.skipped.WithLabelValues(skipAppeared).Inc()
		}
		if d.action != rollOut {
			c.forgetTemplate(f.cons.GetUID()) // the changes since the last sync are taken in
		}
	}
	if v.skip != "" {
		c.metrics.skipped.WithLabelValues(v.skip).Inc()
	}
	if v.log != "" {
		fields := []zap.Field{zap.Stringer("workload", f.key), zap.Strings("changed", v.d.changed)}
		if !v.until.IsZero() {
			fields = append(fields, zap.Time("until", v.until))
		}
		c.logger.Info(v.log, fields...)
	}
	if v.event != "" {
		c.recorder.Event(f.obj.(runtime.Object), v.eventType, v.event, v.message)
	}
}

// haltedInputs tells each input (InputKeys) whose change is halted, and
// the source it was copied from, with msg.
func (c *Controller) haltedInputs(halts []string, msg string) {
	for _, ik := range halts {
		kind, namespace, name := informers.SplitInputKey(ik)
		m, ok := c.object(kind, namespace, name).(metav1.Object)
		if !ok {
			continue
		}
		c.recorder.Event(m.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonReloadHalted, msg)
		if src, _ := objmeta.Annotation(m, wellknown.Source); src != "" {
			if ns, n, err := cache.SplitMetaNamespaceKey(src); err == nil && ns != "" {
				if s, ok := c.object(kind, ns, n).(runtime.Object); ok {
					c.recorder.Event(s, corev1.EventTypeWarning, wellknown.ReasonReloadHalted, msg+" (in namespace "+namespace+")")
				}
			}
		}
	}
}

// rollOut makes the rollout of d, paced by the limiter: a patch of the pod
// template's hash (with the new baseline), or for a Job, its recreation.
func (c *Controller) rollOut(ctx context.Context, f *facts, d decision) error {
	k, w := f.key, f.w
	if ok := c.budget.room(k, f.wave, f.seen, w.GetAnnotations()[wellknown.ConfigInputs], true); !ok {
		return nil // another rollout took the last slot since gather: this one waits its turn
	}
	if err := c.limiter.Wait(ctx); err != nil {
		c.letGo(c.budget.giveBack(k))
		return err
	}
	if k.Kind == workload.Job { // no slot: nothing to wait for
		created, err := c.recreate(ctx, k, w, c.record(f, d.baseline, d.changed), f.dg.configHash(d.baseline))
		if err != nil {
			c.rolloutFailed(k, err)
			c.queue.Remember(k, f.seen)
			return err
		}
		if created != nil {
			c.reloaded(k, created, d.changed, f.seen)
		}
		return nil
	}
	if record, err := c.write(ctx, f, d.baseline, d.changed); errors.Is(err, errNotStored) {
		// Trying again cannot help: say what to fix, once per change.
		c.metrics.reloads.WithLabelValues(k.Kind, "error").Inc()
		msg := fmt.Sprintf("%s changed, but %s written into %s was not kept: this kind's schema has no such field, so the API server dropped it and its operator sees nothing. Give --reload-resources a field path the CRD allows (or none, for metadata.annotations)",
			strings.Join(d.changed, ", "), wellknown.ConfigHash, strings.Join(f.info.hashPath, "."))
		c.logger.Error("reload not stored", zap.Stringer("workload", k), zap.String("reason", msg))
		c.recorder.Event(f.obj.(runtime.Object), corev1.EventTypeWarning, wellknown.ReasonHashNotStored, msg)
		c.letGo(c.budget.giveBack(k))
		return nil
	} else if err != nil {
		c.letGo(c.budget.giveBack(k))
		c.rolloutFailed(k, err)
		c.queue.Remember(k, f.seen) // the retry still measures from the change
		// The record as written: its time is the one the workload carries
		// if the write was made (an answer lost to etcd's timeout comes
		// seconds later; a record made now would not match it).
		c.unanswered(w.GetUID(), err, unansweredRollout{hash: f.dg.configHash(d.baseline), record: record,
			changed: d.changed, seen: f.seen, rv: f.cons.GetResourceVersion()})
		return err
	}
	c.forgetTemplate(f.cons.GetUID())
	c.forgetLost(w.GetUID()) // the rollout's hash was written against the version the failed ones were
	c.reloaded(k, f.obj.(runtime.Object), d.changed, f.seen)
	return nil
}

// rolloutFailed counts a rollout that failed with err. A conflict or a
// workload gone is no failure: the cache had not yet seen a write (the
// workload controller's own status update, say) or the deletion, and the
// sync is tried again at once, quietly (see failed); counting it would
// raise CourierReloadErrors over rollouts that are made.
func (c *Controller) rolloutFailed(k key, err error) {
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return
	}
	c.metrics.reloads.WithLabelValues(k.Kind, "error").Inc()
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

// notifyOnly is a rollout not made: the workload (annotated, when why
// names the annotation; else --reload-mode=notify) only wants to know. The
// baseline takes the change in, so each change is told once; an Event and
// a notification say what would have rolled out and why. Nothing restarts.
func (c *Controller) notifyOnly(ctx context.Context, f *facts, d decision, why string) error {
	if record, err := c.write(ctx, f, d.baseline, nil); err != nil {
		c.unanswered(f.w.GetUID(), err, unansweredRollout{record: record, changed: d.changed,
			rv: f.w.GetResourceVersion(), notifyOnly: why})
		return err
	}
	c.forgetTemplate(f.cons.GetUID())
	c.notified(f.key, f.obj.(runtime.Object), d.changed, why)
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

// keepPending leaves a rollout that must wait (held, suppressed) pending:
// nothing is written, so the baseline still says what the pods were given.
// Only a workload without a baseline, whose rollout rests on the hint of what
// its inputs held before (gone after hintTTL), gets that as its baseline now.
func (c *Controller) keepPending(ctx context.Context, f *facts, d decision) error {
	if !d.firstSight {
		return nil
	}
	_, err := c.write(ctx, f, d.before, nil)
	return err
}

// write patches the baseline, and with changed inputs, the rollout: into
// the workload, or into via, the Deployment holding its pod template. For
// a Rollout with workloadRef and a custom kind without a pod template, the
// hash goes first and alone; if the record then fails to be written, the
// rollout has happened without its record and Event. It returns the record
// it wrote (or tried to).
func (c *Controller) write(ctx context.Context, f *facts, now baseline, changed []string) (record map[string]any, err error) {
	k, info, w, via := f.key, f.info, f.w, f.via
	annotations := c.record(f, now, changed)
	hash := ""
	if len(changed) > 0 {
		hash = f.dg.configHash(now)
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
			return annotations, err
		}
		c.wroteAgainst(w.GetUID(), hobj.GetResourceVersion())
		return annotations, c.patch(ctx, k, info, "", annotations, "")
	}
	if err := c.patch(ctx, k, info, w.GetResourceVersion(), annotations, hash); err != nil {
		return annotations, err
	}
	c.wroteAgainst(w.GetUID(), w.GetResourceVersion())
	return annotations, nil
}

// record is courier's annotations on the workload of f given now as its
// baseline and, with changed inputs, rolled out for them: with the versions
// of the inputs now records as observed (versions.of).
func (c *Controller) record(f *facts, now baseline, changed []string) map[string]any {
	inputs := now.encode(f.dg.id, c.opts.Namespace)
	annotations := map[string]any{wellknown.ConfigInputs: inputs, wellknown.ConfigVersions: nil}
	if v := f.observed.versions.of(now, f.observed.now); len(v) > 0 {
		annotations[wellknown.ConfigVersions] = v.encode(inputs)
	}
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
