package reloader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/courier-k8s/courier/internal/wellknown"
)

// A Job's pod template cannot change, so the reloader rolls a Job out the
// way Reloader does: it deletes the Job (and, through garbage collection,
// its pods: a running Job's work stops) and creates it again with the same
// spec, the fields the Job controller generated left out, and the new
// config hash. Three steps guard the Job against being lost:
//
//   - a dry-run create first, under a generated name, so a missing create
//     permission or an admission policy refusing the Job leaves it as it is
//     (a ResourceQuota's refusal does not count: the old Job fills it);
//   - the delete names the UID and resourceVersion read, so a Job changed
//     meanwhile is read again instead of being replaced by a stale copy;
//   - from just before the delete, the Job to create is kept (pendingJobs)
//     and its create retried with backoff until it succeeds or a Job of that
//     name appears, or the old one turns out not deleted (a delete that
//     failed may have been applied all the same).
//
// From the delete on, the recreation runs to its end on its own deadline
// even if the leadership term ends, and what is still pending is retried
// by the next term of this process. What remains: a courier process killed
// between the delete and a successful create loses the Job (its log line
// "recreating Job" names it, and a Warning JobNotRecreated says why a
// create failed).

// Generated labels: the Job controller's, on the Job and its pod template,
// tying them to the old Job's UID.
var generatedJobLabels = []string{
	batchv1.ControllerUidLabel, batchv1.JobNameLabel,
	"controller-uid", "job-name", // their legacy names, still set
}

// successor is the Job that replaces live: its spec and metadata as its
// owner wrote them (without what the API server and the Job controller
// generated: UID, resourceVersion, status, the selector and its labels
// unless the selector is the owner's own, spec.manualSelector), courier's
// annotations set (nil values removed), and courier.dev/config-hash on its
// pod template.
func successor(live *batchv1.Job, annotations map[string]any, hash string) *batchv1.Job {
	next := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: live.Name, Namespace: live.Namespace,
			Labels: maps.Clone(live.Labels), Annotations: maps.Clone(live.Annotations),
			OwnerReferences: live.OwnerReferences, Finalizers: live.Finalizers,
		},
		Spec: *live.Spec.DeepCopy(),
	}
	next.Finalizers = slices.DeleteFunc(slices.Clone(next.Finalizers), func(f string) bool {
		return f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents // the old one's deletion's
	})
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	for k, v := range annotations {
		if s, ok := v.(string); ok {
			next.Annotations[k] = s
		} else {
			delete(next.Annotations, k)
		}
	}
	t := &next.Spec.Template
	if next.Spec.ManualSelector == nil || !*next.Spec.ManualSelector {
		next.Spec.Selector = nil
		for _, l := range generatedJobLabels {
			delete(next.Labels, l)
			delete(t.Labels, l)
		}
	}
	t.Annotations = maps.Clone(t.Annotations)
	if t.Annotations == nil {
		t.Annotations = map[string]string{}
	}
	t.Annotations[wellknown.ConfigHash] = hash
	return next
}

// recreate rolls Job k out, as cached (w): see successor. It returns the
// new Job, or nil when the Job is being deleted meanwhile or someone else
// created one of its name first.
//
// What it decided on must still hold: the live Job must be the cached one
// at the same resourceVersion (else the cache catches up and the Job is
// synced again), and not being deleted. From the delete on, the term's end
// does not cut it short: the create runs to its end on its own deadline.
func (c *Controller) recreate(ctx context.Context, k key, w metav1.Object, annotations map[string]any, hash string) (*batchv1.Job, error) {
	jobs := c.client.BatchV1().Jobs(k.Namespace)
	live, err := jobs.Get(ctx, k.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", k, err)
	}
	if live.UID != w.GetUID() || live.ResourceVersion != w.GetResourceVersion() {
		return nil, apierrors.NewConflict(batchv1.Resource("jobs"), k.Name, fmt.Errorf("changed since it was cached"))
	}
	if live.DeletionTimestamp != nil {
		return nil, nil // going away: nothing to recreate
	}
	next := successor(live, annotations, hash)
	trial := next.DeepCopy()
	trial.Name, trial.GenerateName = "", k.Name+"-"
	if _, err := jobs.Create(ctx, trial, metav1.CreateOptions{FieldManager: wellknown.FieldManager, DryRun: []string{metav1.DryRunAll}}); err != nil && !overQuota(err) {
		return nil, fmt.Errorf("%s would not be created again (dry run), so it is left as it is: %w", k, err)
	}
	c.logger.Info("recreating Job: deleting it, then creating it again with the new content", zap.Stringer("workload", k), zap.String("uid", string(live.UID)))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recreateTimeout)
	defer cancel()
	// Pending before the delete: a delete that fails may have been applied
	// all the same (etcd timed out and committed it late, the connection
	// broke, client-go resent it and met NotFound), and the Job must not
	// be lost then. The next sync's createPending finds out which.
	c.mu.Lock()
	c.pendingJobs[k] = pendingJob{next: next, old: live.UID}
	c.mu.Unlock()
	background := metav1.DeletePropagationBackground
	if err := jobs.Delete(ctx, k.Name, metav1.DeleteOptions{
		Preconditions:     &metav1.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion},
		PropagationPolicy: &background,
	}); err != nil {
		return nil, fmt.Errorf("delete %s to recreate it: %w", k, err)
	}
	return c.createPending(ctx, k)
}

// pendingJob is a Job recreate deletes (its UID: old) to create next.
type pendingJob struct {
	next *batchv1.Job
	old  types.UID
}

// errNotDeleted: the Job createPending would create again is still the one
// recreate meant to delete, not being deleted: the delete was refused.
var errNotDeleted = errors.New("the delete courier sent to recreate it was not applied")

// recreateTimeout bounds a recreation from its delete on, whatever happens
// to the leadership term meanwhile.
const recreateTimeout = 30 * time.Second

// overQuota reports whether err is a ResourceQuota's refusal. A dry run
// counts the old Job and the new one together, so a namespace whose quota
// the old one fills refuses it; the delete frees what the new one needs.
func overQuota(err error) bool {
	return apierrors.IsForbidden(err) && strings.Contains(err.Error(), "exceeded quota")
}

// hasPending reports whether Job k was deleted to be recreated and is not
// created yet.
func (c *Controller) hasPending(k key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.pendingJobs[k]
	return ok
}

// createPending creates the Job recreate deleted, retrying for a while
// (the old one may still hold the name; the API server may be busy); what
// still fails stays pending for the next sync of k.
func (c *Controller) createPending(ctx context.Context, k key) (*batchv1.Job, error) {
	c.mu.Lock()
	p, ok := c.pendingJobs[k]
	c.mu.Unlock()
	if !ok {
		return nil, nil
	}
	next := p.next
	jobs := c.client.BatchV1().Jobs(k.Namespace)
	var created *batchv1.Job
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		created, last = jobs.Create(ctx, next.DeepCopy(), metav1.CreateOptions{FieldManager: wellknown.FieldManager})
		switch {
		case last == nil:
			return true, nil
		case apierrors.IsAlreadyExists(last):
			there, err := jobs.Get(ctx, k.Name, metav1.GetOptions{})
			switch {
			case err != nil || there.DeletionTimestamp != nil:
				return false, nil // the old one is still going
			case there.UID == p.old:
				return false, errNotDeleted
			case there.Spec.Template.Annotations[wellknown.ConfigHash] == next.Spec.Template.Annotations[wellknown.ConfigHash]:
				created = there // an earlier create whose answer was lost
				return true, nil
			}
			return false, last // someone else's Job holds the name now: it stays
		case apierrors.IsForbidden(last) || apierrors.IsInvalid(last):
			return false, last
		}
		return false, nil
	})
	switch {
	case errors.Is(err, errNotDeleted):
		c.forgetPending(k)
		return nil, apierrors.NewConflict(batchv1.Resource("jobs"), k.Name, errNotDeleted) // decided again, on the Job as it is
	case err != nil && apierrors.IsAlreadyExists(err):
		c.forgetPending(k)
		c.logger.Error("a Job courier deleted to recreate was created again by someone else meanwhile; theirs is kept", zap.Stringer("workload", k))
		return nil, nil
	case apierrors.IsNotFound(last) || apierrors.HasStatusCause(last, corev1.NamespaceTerminatingCause):
		c.forgetPending(k)
		c.logger.Info("a Job courier deleted to recreate is not created again: its namespace is gone or going", zap.Stringer("workload", k))
		return nil, nil
	case err != nil:
		if last == nil {
			last = err
		}
		msg := fmt.Sprintf("courier deleted this Job to recreate it (an input changed) and could not create it again yet; it retries with backoff until it can, or a Job of this name appears: %v", last)
		c.logger.Error("a Job courier deleted to recreate it could not be created yet; retrying with backoff", zap.Stringer("workload", k), zap.Error(last))
		c.recorder.Event(next, corev1.EventTypeWarning, wellknown.ReasonJobNotRecreated, msg)
		return nil, fmt.Errorf("create %s again: %w", k, last)
	}
	c.forgetPending(k)
	return created, nil
}

func (c *Controller) forgetPending(k key) {
	c.mu.Lock()
	delete(c.pendingJobs, k)
	c.mu.Unlock()
}
