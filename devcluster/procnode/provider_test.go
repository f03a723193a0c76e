package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// notified collects the provider's notifications, as virtual-kubelet would receive them.
type notified struct {
	mu   sync.Mutex
	last map[string]*corev1.Pod
}

func (s *notified) notify(p *corev1.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last[p.Name] = p
}

func (s *notified) wait(t *testing.T, name string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		p := s.last[name]
		s.mu.Unlock()
		if p != nil && ok(p) {
			return p
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pod %s: condition not reached; last %+v", name, s.last[name])
	return nil
}

func newTestProvider(t *testing.T) (*Provider, *notified) {
	t.Helper()
	p, err := NewProvider("proc-test", t.TempDir(), map[string]string{"PATH": "/usr/bin:/bin"}, objs)
	if err != nil {
		t.Fatal(err)
	}
	s := &notified{last: map[string]*corev1.Pod{}}
	p.NotifyPods(context.Background(), s.notify)
	return p, s
}

func shPod(name string, policy corev1.RestartPolicy, scripts ...string) *corev1.Pod {
	pod := testPod()
	pod.Name, pod.UID = name, types.UID("uid-"+name+"-0000")
	pod.OwnerReferences = []metav1.OwnerReference{{Kind: "Job", Name: "job-a"}}
	pod.Spec.RestartPolicy = policy
	for i, s := range scripts {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: string(rune('a' + i)), Command: []string{"sh", "-c", s},
			Env: []corev1.EnvVar{{Name: "IDX", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.annotations['" + CompletionIndexAnnotation + "']"}}}},
		})
	}
	return pod
}

func phase(ph corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == ph }
}

func TestPodRunsAndJournals(t *testing.T) {
	p, s := newTestProvider(t)
	if err := p.CreatePod(context.Background(), shPod("ok", corev1.RestartPolicyNever, `echo "i=$IDX home=$HOME"`)); err != nil {
		t.Fatal(err)
	}
	done := s.wait(t, "ok", phase(corev1.PodSucceeded))
	term := done.Status.ContainerStatuses[0].State.Terminated
	if term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Fatalf("status %+v", done.Status.ContainerStatuses[0])
	}
	dir := filepath.Join(p.Dir, "pods", "ns_ok_uid-ok-0")
	if log, _ := os.ReadFile(filepath.Join(dir, "a.log")); string(log) != "i=7 home="+dir+"\n" {
		t.Fatalf("log %q", log)
	}
	data, _ := os.ReadFile(filepath.Join(p.Dir, "journal.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	var first, last map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &first)
	_ = json.Unmarshal([]byte(lines[len(lines)-1]), &last)
	if first["event"] != "start" || first["job"] != "job-a" || first["index"] != 7.0 || first["pod"] != "ns/ok" {
		t.Fatalf("first journal line %v", first)
	}
	if last["event"] != "exit" || last["exit_code"] != 0.0 {
		t.Fatalf("last journal line %v", last)
	}
}

func TestFailureRestartAndDeletion(t *testing.T) {
	p, s := newTestProvider(t)
	ctx := context.Background()
	_ = p.CreatePod(ctx, shPod("three", corev1.RestartPolicyNever, "exit 3"))
	_ = p.CreatePod(ctx, shPod("retry", corev1.RestartPolicyOnFailure, "[ -f ran ] && exit 0; touch ran; exit 1"))
	_ = p.CreatePod(ctx, shPod("long", corev1.RestartPolicyNever, "trap '' TERM; sleep 60 & wait", "sleep 60"))
	failed := s.wait(t, "three", phase(corev1.PodFailed))
	if term := failed.Status.ContainerStatuses[0].State.Terminated; term.ExitCode != 3 || term.Reason != "Error" {
		t.Fatalf("three: %+v", term)
	}
	retried := s.wait(t, "retry", phase(corev1.PodSucceeded))
	if retried.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Fatalf("retry: %+v", retried.Status.ContainerStatuses[0])
	}
	s.wait(t, "long", phase(corev1.PodRunning))
	del := shPod("long", corev1.RestartPolicyNever)
	del.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	grace := int64(1)
	del.DeletionGracePeriodSeconds = &grace
	t0 := time.Now()
	if err := p.DeletePod(ctx, del); err != nil {
		t.Fatal(err)
	}
	ended := s.wait(t, "long", phase(corev1.PodFailed))
	if took := time.Since(t0); took < 900*time.Millisecond || took > 5*time.Second {
		t.Fatalf("ended after %s with a 1 s grace", took)
	}
	codes := map[string]int32{}
	for _, c := range ended.Status.ContainerStatuses {
		codes[c.Name] = c.State.Terminated.ExitCode
	}
	if codes["a"] != 137 || codes["b"] != 143 { // a ignored SIGTERM and was killed; b ended on SIGTERM
		t.Fatalf("exit codes %v", codes)
	}
	if err := p.DeletePod(ctx, del); err != nil { // all ended: forgotten
		t.Fatal(err)
	}
	if _, err := p.GetPod(ctx, "ns", "long"); err == nil {
		t.Fatal("a deleted pod whose processes ended is forgotten")
	}
}

func TestLeftoversOfAKilledNodeAreKilledAndJournaled(t *testing.T) {
	p, s := newTestProvider(t)
	_ = p.CreatePod(context.Background(), shPod("orphan", corev1.RestartPolicyNever, "sleep 60"))
	running := s.wait(t, "orphan", phase(corev1.PodRunning))
	var pid int
	_, _ = fmt.Sscanf(running.Status.ContainerStatuses[0].ContainerID, "procnode://%d", &pid)
	// a new procnode on the same state directory (the old one was SIGKILLed: its children live on)
	again, err := NewProvider("proc-test", p.Dir, nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	again.KillLeftovers()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Fatalf("leftover pid %d still runs", pid)
	}
	data, _ := os.ReadFile(filepath.Join(p.Dir, "journal.jsonl"))
	if !strings.Contains(string(data), `"leftover":true`) || !strings.Contains(string(data), `"exit_code":137`) {
		t.Fatalf("journal %s", data)
	}
}

// An evicted pod's DisruptionTarget (written by the Eviction API on the API server's copy) survives the status
// this node reports when the process exits, while the kubelet-owned conditions stay this node's.
func TestConditionsOfOtherWritersAreKept(t *testing.T) {
	p, s := newTestProvider(t)
	pod := shPod("evicted", corev1.RestartPolicyNever, "trap 'exit 143' TERM; while :; do sleep 0.05; done")
	api := pod.DeepCopy()
	api.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI"},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "stale"},
	}
	p.Current = func(ns, name string) *corev1.Pod {
		if ns == pod.Namespace && name == pod.Name {
			return api
		}
		return nil
	}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	s.wait(t, "evicted", phase(corev1.PodRunning))
	grace := int64(5)
	deleted := pod.DeepCopy()
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &metav1.Time{Time: time.Now()}, &grace
	if err := p.DeletePod(context.Background(), deleted); err != nil {
		t.Fatal(err)
	}
	end := s.wait(t, "evicted", phase(corev1.PodFailed))
	var target, ready *corev1.PodCondition
	for i := range end.Status.Conditions {
		switch end.Status.Conditions[i].Type {
		case corev1.DisruptionTarget:
			target = &end.Status.Conditions[i]
		case corev1.PodReady:
			ready = &end.Status.Conditions[i]
		}
	}
	if target == nil || target.Reason != "EvictionByEvictionAPI" {
		t.Fatalf("DisruptionTarget not kept: %+v", end.Status.Conditions)
	}
	if ready == nil || ready.Status != corev1.ConditionFalse {
		t.Fatalf("PodReady must be this node's (False after exit): %+v", end.Status.Conditions)
	}
}
