package workload

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Health is what a workload's status says of its latest pod template: what
// a rollout wave waits for (docs/reload.md, Rollout waves).
type Health uint8

const (
	// Healthy: every replica runs the latest template and is available;
	// also every kind a wave does not wait for (CronJob, Job, a custom
	// kind other than Argo Rollouts).
	Healthy Health = iota
	// Progressing: its controller has not yet brought every replica to the
	// latest template, or not yet seen it (observedGeneration).
	Progressing
	// Failed: its controller gave up: a Deployment's Progressing condition
	// is False (ProgressDeadlineExceeded), an Argo Rollout is Degraded.
	Failed
)

func (h Health) String() string {
	switch h {
	case Progressing:
		return "progressing"
	case Failed:
		return "failed"
	}
	return "healthy"
}

// Waits reports whether a wave waits for a workload of kind to be healthy
// (and so whether its health is read at all).
func Waits(kind string) bool {
	return kind == Deployment || kind == StatefulSet || kind == DaemonSet || kind == Rollout
}

// HealthOf is the health of a typed workload or of the cached form.
func HealthOf(obj any) Health {
	switch w := obj.(type) {
	case *Object:
		return w.Health
	case *appsv1.Deployment:
		return deploymentHealth(w)
	case *appsv1.StatefulSet:
		return statefulSetHealth(w)
	case *appsv1.DaemonSet:
		return daemonSetHealth(w)
	}
	return Healthy
}

// deploymentHealth: healthy as `kubectl rollout status` judges a
// Deployment done: the latest generation observed, every replica updated
// and available, no old replica left; failed once its progress deadline is
// exceeded.
func deploymentHealth(d *appsv1.Deployment) Health {
	if d.Status.ObservedGeneration < d.Generation {
		return Progressing
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
			return Failed // the only reason it is False: ProgressDeadlineExceeded
		}
	}
	want := replicas(d.Spec.Replicas)
	s := d.Status
	if s.UpdatedReplicas < want || s.Replicas > s.UpdatedReplicas || s.AvailableReplicas < s.UpdatedReplicas {
		return Progressing
	}
	return Healthy
}

// statefulSetHealth: every replica the update strategy updates is on
// updateRevision and ready (with a partition, those at or above it). Under
// OnDelete the strategy updates none (pods take the template when someone
// deletes them): healthy once the controller has seen the template.
func statefulSetHealth(s *appsv1.StatefulSet) Health {
	if s.Status.ObservedGeneration < s.Generation {
		return Progressing
	}
	if s.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return Healthy
	}
	want := replicas(s.Spec.Replicas)
	updated := want
	if r := s.Spec.UpdateStrategy.RollingUpdate; s.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType && r != nil && r.Partition != nil {
		updated = max(0, want-*r.Partition)
	}
	st := s.Status
	if st.UpdatedReplicas < updated || st.ReadyReplicas < want || (updated == want && st.CurrentRevision != st.UpdateRevision) {
		return Progressing
	}
	return Healthy
}

// daemonSetHealth: every node that should run a pod runs an updated one,
// available (under OnDelete: once the controller has seen the template, as
// for a StatefulSet).
func daemonSetHealth(d *appsv1.DaemonSet) Health {
	s := d.Status
	if s.ObservedGeneration < d.Generation {
		return Progressing
	}
	if d.Spec.UpdateStrategy.Type == appsv1.OnDeleteDaemonSetStrategyType {
		return Healthy
	}
	if s.UpdatedNumberScheduled < s.DesiredNumberScheduled || s.NumberAvailable < s.DesiredNumberScheduled {
		return Progressing
	}
	return Healthy
}

// rolloutHealth is an Argo Rollout's status.phase, once its controller has
// seen its latest generation (status.observedGeneration, a string). One
// with spec.workloadRef must also have rolled out its Deployment's latest
// generation: the reloader checks WorkloadGeneration against it.
func rolloutHealth(u *unstructured.Unstructured) Health {
	observed, _, _ := unstructured.NestedString(u.Object, "status", "observedGeneration")
	if observed != strconv.FormatInt(u.GetGeneration(), 10) {
		return Progressing
	}
	switch phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase {
	case "Healthy":
		return Healthy
	case "Degraded":
		return Failed
	}
	return Progressing
}

func replicas(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}
