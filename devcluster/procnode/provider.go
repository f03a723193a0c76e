package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CompletionIndexAnnotation is where the Job controller writes an Indexed Job pod's index.
const CompletionIndexAnnotation = "batch.kubernetes.io/job-completion-index"

// Provider runs each pod bound to its node as local processes (virtual-kubelet's PodLifecycleHandler and
// PodNotifier), and writes what ran when to the node's journal.
type Provider struct {
	NodeName string
	Dir      string // .devcluster/procnode/<node>
	Base     map[string]string
	Objects  Objects
	Journal  *Journal
	// Current returns the API server's copy of a pod (an informer's cache), or nil; its conditions written by
	// others are kept in the status this node reports.
	Current func(namespace, name string) *corev1.Pod

	mu     sync.Mutex
	pods   map[string]*podRun
	notify func(*corev1.Pod)
}

// NewProvider keeps its pods under dir/pods and its journal in dir/journal.jsonl.
func NewProvider(nodeName, dir string, base map[string]string, objs Objects) (*Provider, error) {
	if err := os.MkdirAll(filepath.Join(dir, "pods"), 0o755); err != nil {
		return nil, err
	}
	j, err := OpenJournal(filepath.Join(dir, "journal.jsonl"))
	if err != nil {
		return nil, err
	}
	return &Provider{NodeName: nodeName, Dir: dir, Base: base, Objects: objs, Journal: j, pods: map[string]*podRun{}}, nil
}

func key(ns, name string) string { return ns + "/" + name }

// CreatePod starts the pod's lifecycle (init containers, then all containers) in the background.
func (p *Provider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := key(pod.Namespace, pod.Name)
	if old, ok := p.pods[k]; ok && old.pod.UID == pod.UID {
		return nil
	}
	run := newPodRun(p, pod.DeepCopy(), p.podDir(pod))
	p.pods[k] = run
	go run.lifecycle(context.Background())
	return nil
}

// podDir is where pod's containers run and write their logs: <Dir>/pods/<namespace>_<name>_<uid8>. Nothing
// removes it, when the pod ends or when it is deleted: its logs stay on disk for the tests (and for
// GetContainerLogs while the API server still has the pod).
func (p *Provider) podDir(pod *corev1.Pod) string {
	uid8 := string(pod.UID)
	if len(uid8) > 8 {
		uid8 = uid8[:8]
	}
	return filepath.Join(p.Dir, "pods", fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, uid8))
}

// UpdatePod is a no-op: a running container's spec does not change (the kubelet ignores such updates too).
func (p *Provider) UpdatePod(context.Context, *corev1.Pod) error { return nil }

// DeletePod stops the pod's processes with its grace period (SIGTERM, then SIGKILL); a pod the API server
// no longer has (force-deleted) gets SIGKILL at once. A pod whose processes all ended is forgotten.
func (p *Provider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	run, ok := p.pods[key(pod.Namespace, pod.Name)]
	if ok && run.pod.UID != pod.UID {
		ok = false
	}
	if ok && run.finished() {
		delete(p.pods, key(pod.Namespace, pod.Name))
	}
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFound("pod not found in procnode")
	}
	run.terminate(gracePeriod(pod))
	return nil
}

func gracePeriod(pod *corev1.Pod) time.Duration {
	if pod.DeletionTimestamp == nil {
		return 0 // gone from the API server: nothing waits for a graceful end
	}
	if pod.DeletionGracePeriodSeconds != nil {
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	}
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// GetPod returns the pod with its current status.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	run, ok := p.pods[key(namespace, name)]
	p.mu.Unlock()
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s not found in procnode", namespace, name)
	}
	return run.snapshot(), nil
}

// GetPodStatus returns the pod's current status.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	pod, err := p.GetPod(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods lists the pods the node knows.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for _, r := range p.pods {
		runs = append(runs, r)
	}
	p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(runs))
	for _, r := range runs {
		out = append(out, r.snapshot())
	}
	return out, nil
}

// NotifyPods registers virtual-kubelet's status callback.
func (p *Provider) NotifyPods(_ context.Context, cb func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = cb
	p.mu.Unlock()
}

func (p *Provider) changed(run *podRun) {
	p.mu.Lock()
	cb := p.notify
	p.mu.Unlock()
	if cb != nil {
		cb(run.snapshot())
	}
}

// KillAll SIGKILLs every pod's processes at once (the node's VM is gone) and returns the pods it had.
func (p *Provider) KillAll() []*corev1.Pod {
	p.mu.Lock()
	runs := make([]*podRun, 0, len(p.pods))
	for k, r := range p.pods {
		runs = append(runs, r)
		delete(p.pods, k)
	}
	p.mu.Unlock()
	pods := make([]*corev1.Pod, 0, len(runs))
	for _, r := range runs {
		r.mu.Lock()
		r.lost = true
		r.mu.Unlock()
		r.terminate(0)
		pods = append(pods, r.pod)
	}
	return pods
}

// KillLeftovers SIGKILLs the process groups a previous procnode of this node left running (it was killed
// before it could stop them) and journals their end: their pods are the API server's to account for, not
// orphans to adopt.
func (p *Provider) KillLeftovers() {
	files, _ := filepath.Glob(filepath.Join(p.Dir, "pods", "*", "*.pid"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		var pid int
		if err == nil {
			_, err = fmt.Sscanf(strings.TrimSpace(string(data)), "%d", &pid)
		}
		_ = os.Remove(f)
		if err != nil || pid <= 1 || syscall.Kill(-pid, syscall.SIGKILL) != nil {
			continue // gone already
		}
		var pod corev1.Pod
		if raw, err := os.ReadFile(filepath.Join(filepath.Dir(f), podFile)); err == nil && json.Unmarshal(raw, &pod) == nil {
			container := strings.TrimSuffix(filepath.Base(f), ".pid")
			p.Journal.Record(&pod, container, "signal", map[string]any{"signal": "SIGKILL", "grace": 0, "leftover": true})
			p.Journal.Record(&pod, container, "exit", map[string]any{"exit_code": 137, "signal": "SIGKILL", "leftover": true})
		}
	}
}

// podFile in a pod's directory is the pod as created (metadata and spec), for KillLeftovers' journal lines.
const podFile = "pod.json"

// Journal is the node's append-only record of starts, signals and exits, one JSON object a line.
type Journal struct {
	mu sync.Mutex
	f  *os.File
}

// OpenJournal opens path for appending.
func OpenJournal(path string) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &Journal{f: f}, nil
}

// Record appends one event of pod's container; extra holds "signal" or "exit_code".
func (j *Journal) Record(pod *corev1.Pod, container, event string, extra map[string]any) {
	entry := map[string]any{
		"t": float64(time.Now().UnixNano()) / 1e9, "event": event, "pod": key(pod.Namespace, pod.Name),
		"uid": string(pod.UID), "container": container, "job": ownerJob(pod), "index": completionIndex(pod),
		"cpu": cpuRequest(pod),
	}
	for k, v := range extra {
		entry[k] = v
	}
	line, err := json.Marshal(entry)
	if err != nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	_, _ = j.f.Write(append(line, '\n'))
}

func ownerJob(pod *corev1.Pod) any {
	for _, o := range pod.OwnerReferences {
		if o.Kind == "Job" {
			return o.Name
		}
	}
	return nil
}

func completionIndex(pod *corev1.Pod) any {
	if v, ok := pod.Annotations[CompletionIndexAnnotation]; ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
	}
	return nil
}

func cpuRequest(pod *corev1.Pod) float64 {
	var milli int64
	for _, c := range pod.Spec.Containers {
		if q, ok := c.Resources.Requests[corev1.ResourceCPU]; ok {
			milli += q.MilliValue()
		}
	}
	return float64(milli) / 1000
}

var errDeleted = errors.New("pod deleted")

func now() metav1.Time { return metav1.NewTime(time.Now()) }
