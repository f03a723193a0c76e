package main

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// lastStatus is the pod of the last status update sent to the API server, or nil.
func lastStatus(client *fake.Clientset) *corev1.Pod {
	var pod *corev1.Pod
	for _, a := range client.Actions() {
		if u, ok := a.(k8stesting.UpdateAction); ok && u.GetSubresource() == "status" {
			pod = u.GetObject().(*corev1.Pod)
		}
	}
	return pod
}

// deleting is a pod the API server shows Running on this node, being deleted (a Spot eviction's DisruptionTarget
// set by its deleter), as a procnode killed while it ran leaves it.
func deleting(name string) *corev1.Pod {
	pod := shPod(name, corev1.RestartPolicyNever, "sleep 60")
	pod.DeletionTimestamp = &metav1.Time{Time: now().Add(30e9)}
	pod.Finalizers = []string{"batch.kubernetes.io/job-tracking"}
	running := true
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue},
			{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "TerminationByKubelet"},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "a", Ready: true, Started: &running,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now()}},
		}},
	}
	return pod
}

func newFinisher(t *testing.T, pods ...*corev1.Pod) (*Finisher, *fake.Clientset, *Provider) {
	t.Helper()
	p, _ := newTestProvider(t)
	client := fake.NewClientset()
	for _, pod := range pods {
		if _, err := client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound := func() []*corev1.Pod {
		list, _ := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
		out := make([]*corev1.Pod, 0, len(list.Items))
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
		return out
	}
	return &Finisher{Provider: p, Pods: client.CoreV1(), Bound: bound}, client, p
}

func actions(client *fake.Clientset, verb string) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "pods" {
			out = append(out, a.GetSubresource())
		}
	}
	return out
}

// A pod deleted while its procnode was down: no process of it here, so after one period the node ends it as a
// kubelet ends a pod it cannot find (phase Failed, exit 137, ContainerStatusUnknown), keeps its deleter's
// DisruptionTarget (so the Job's podFailurePolicy can ignore it), and deletes it with no grace.
func TestADeletingPodWithNoProcessIsEnded(t *testing.T) {
	f, client, _ := newFinisher(t, deleting("orphan"))
	ctx := context.Background()
	if n := f.Sweep(ctx); n != 0 {
		t.Fatalf("the first sweep only notes a candidate; finished %d", n)
	}
	if n := f.Sweep(ctx); n != 1 {
		t.Fatalf("the second sweep finishes it; finished %d", n)
	}
	if got := actions(client, "update"); len(got) != 1 || got[0] != "status" {
		t.Fatalf("status updates %v", got)
	}
	ended := lastStatus(client)
	if ended.Status.Phase != corev1.PodFailed {
		t.Fatalf("phase %s", ended.Status.Phase)
	}
	term := ended.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 137 || term.Reason != "ContainerStatusUnknown" {
		t.Fatalf("container %+v", ended.Status.ContainerStatuses[0])
	}
	conds := map[corev1.PodConditionType]corev1.PodCondition{}
	for _, c := range ended.Status.Conditions {
		conds[c.Type] = c
	}
	if conds[corev1.DisruptionTarget].Reason != "TerminationByKubelet" || conds[corev1.PodReady].Status != corev1.ConditionFalse {
		t.Fatalf("conditions %+v", ended.Status.Conditions)
	}
	if got := actions(client, "delete"); len(got) != 1 {
		t.Fatalf("deletes %v", got)
	}
}

// What is not the Finisher's: a pod whose process still runs (its grace is the provider's), a pod not being
// deleted, a pod already terminal.
func TestPodsWithAProcessOrNotDeletingAreLeftAlone(t *testing.T) {
	live := deleting("live")
	notDeleting := deleting("kept")
	notDeleting.DeletionTimestamp = nil
	done := deleting("done")
	done.Status.Phase = corev1.PodSucceeded
	f, client, p := newFinisher(t, live, notDeleting, done)
	running := shPod("live", corev1.RestartPolicyNever, "sleep 60")
	if err := p.CreatePod(context.Background(), running); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.KillAll()
		// The run's goroutine journals the kill after KillAll returns: let it finish before TempDir's RemoveAll.
		time.Sleep(300 * time.Millisecond)
	})
	for range 3 {
		if n := f.Sweep(context.Background()); n != 0 {
			t.Fatalf("finished %d", n)
		}
	}
	if got := append(actions(client, "update"), actions(client, "delete")...); len(got) != 0 {
		t.Fatalf("writes %v", got)
	}
}

// A pod whose run ended on this node but whose final status never reached the API server (the write was lost)
// gets the status its run reported: the real exit code, not 137.
func TestAFinishedRunReportsItsOwnExitCode(t *testing.T) {
	pod := deleting("exited")
	pod.Spec.Containers[0].Command = []string{"sh", "-c", "exit 3"}
	f, client, p := newFinisher(t, pod)
	created := pod.DeepCopy() // as virtual-kubelet hands it over at creation: no status yet
	created.Status, created.DeletionTimestamp = corev1.PodStatus{}, nil
	if err := p.CreatePod(context.Background(), created); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := 0; i < 500 && p.HasLiveRun(pod); i++ {
		f.Sweep(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	f.Sweep(ctx)
	f.Sweep(ctx)
	ended := lastStatus(client)
	if ended == nil || ended.UID != types.UID("uid-exited-0000") {
		t.Fatal("no status written")
	}
	if term := ended.Status.ContainerStatuses[0].State.Terminated; term == nil || term.ExitCode != 3 {
		t.Fatalf("container %+v", ended.Status.ContainerStatuses[0])
	}
}
