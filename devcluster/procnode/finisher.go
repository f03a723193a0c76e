package main

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
)

// Finisher ends the deletion of pods this node no longer runs, as a kubelet does after it restarts: a pod bound
// here, being deleted, not in a terminal phase, with no process left on the node, gets a terminal status (phase
// Failed, its containers terminated; the conditions others set, such as DisruptionTarget, kept), then is
// deleted with no grace.
//
// Why virtual-kubelet's own path is not enough: for a deleting pod its provider does not know (the procnode was
// killed while the pod ran, or the pod was deleted while the procnode was down) it only force-deletes the pod
// and writes no status. A Job pod keeps its tracking finalizer until its phase is terminal, and a Job with a
// podFailurePolicy does not replace a pod before that, so the pod stays Terminating and its index waits for
// ever (the hour-long fault soak of 2026-12-03 found it).
type Finisher struct {
	Provider *Provider
	// Bound lists the API server's pods bound to this node (the pod informer's cache).
	Bound func() []*corev1.Pod
	Pods  typedcorev1.PodsGetter

	mu      sync.Mutex
	pending map[types.UID]bool // candidates of the previous sweep
}

// sweepEvery is the Finisher's period: a stuck pod is finished within two of them.
const sweepEvery = 5 * time.Second

// Run sweeps every period until ctx ends.
func (f *Finisher) Run(ctx context.Context, period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		f.Sweep(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep finishes the pods that were candidates in this sweep and the previous one (a pod whose process just
// ended is left to the provider's own status report for one period), and returns how many it finished.
func (f *Finisher) Sweep(ctx context.Context) int {
	now := map[types.UID]bool{}
	var due []*corev1.Pod
	f.mu.Lock()
	for _, pod := range f.Bound() {
		if !f.candidate(pod) {
			continue
		}
		now[pod.UID] = true
		if f.pending[pod.UID] {
			due = append(due, pod)
		}
	}
	f.pending = now
	f.mu.Unlock()
	finished := 0
	for _, pod := range due {
		if err := f.finish(ctx, pod); err != nil {
			klog.Warningf("finish the deletion of pod %s/%s: %v (next sweep retries)", pod.Namespace, pod.Name, err)
			continue
		}
		finished++
	}
	return finished
}

func (f *Finisher) candidate(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp == nil || pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		return false
	}
	return !f.Provider.HasLiveRun(pod)
}

func (f *Finisher) finish(ctx context.Context, pod *corev1.Pod) error {
	ended := pod.DeepCopy()
	ended.Status = f.Provider.EndedStatus(pod)
	ended.ResourceVersion = pod.ResourceVersion
	_, err := f.Pods.Pods(pod.Namespace).UpdateStatus(ctx, ended, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil { // a conflict: changed since the cache saw it, the next sweep reads the new copy
		return err
	}
	zero := int64(0)
	err = f.Pods.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return err
	}
	klog.Infof("finished the deletion of pod %s/%s: no process of it left on the node", pod.Namespace, pod.Name)
	return nil
}

// HasLiveRun: the node runs (or is still stopping) this pod's processes.
func (p *Provider) HasLiveRun(pod *corev1.Pod) bool {
	p.mu.Lock()
	run, ok := p.pods[key(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	return ok && run.pod.UID == pod.UID && !run.finished()
}

// EndedStatus is the terminal status of a pod with no process left: the status its finished run reported when
// the node ran it, else the API server's with every container not yet terminated marked as the kubelet marks
// one it cannot find (exit code 137, reason ContainerStatusUnknown).
func (p *Provider) EndedStatus(pod *corev1.Pod) corev1.PodStatus {
	p.mu.Lock()
	run, ok := p.pods[key(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if ok && run.pod.UID == pod.UID && run.finished() {
		return run.snapshot().Status
	}
	st := *pod.Status.DeepCopy()
	st.Phase = corev1.PodFailed
	t := now()
	unknown := func(specs []corev1.Container, have []corev1.ContainerStatus) []corev1.ContainerStatus {
		byName := map[string]corev1.ContainerStatus{}
		for _, s := range have {
			byName[s.Name] = s
		}
		out := make([]corev1.ContainerStatus, 0, len(specs))
		for _, c := range specs {
			s, seen := byName[c.Name]
			if !seen {
				s = corev1.ContainerStatus{Name: c.Name, Image: c.Image}
			}
			if s.State.Terminated == nil {
				s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
					ExitCode: 137, Reason: "ContainerStatusUnknown", FinishedAt: t,
					Message: "The container could not be located when the pod was terminated",
				}}
			}
			started, ready := false, false
			s.Started, s.Ready = &started, ready
			out = append(out, s)
		}
		return out
	}
	st.InitContainerStatuses = unknown(pod.Spec.InitContainers, pod.Status.InitContainerStatuses)
	st.ContainerStatuses = unknown(pod.Spec.Containers, pod.Status.ContainerStatuses)
	for i := range st.Conditions {
		switch st.Conditions[i].Type {
		case corev1.PodReady, corev1.ContainersReady:
			if st.Conditions[i].Status != corev1.ConditionFalse {
				st.Conditions[i].Status, st.Conditions[i].LastTransitionTime = corev1.ConditionFalse, t
				st.Conditions[i].Reason = "PodCompleted"
			}
		}
	}
	return st
}
