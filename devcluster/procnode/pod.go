package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ctr is one container's state across its restarts.
type ctr struct {
	spec     corev1.Container
	init     bool
	state    corev1.ContainerState
	last     corev1.ContainerState
	restarts int32
	started  bool
	proc     *Proc
}

// podRun is one pod's lifecycle on the node: init containers in order, then all containers at once.
type podRun struct {
	p   *Provider
	pod *corev1.Pod // as created; its status is rebuilt by snapshot
	dir string

	mu       sync.Mutex
	phase    corev1.PodPhase
	start    metav1.Time
	initDone bool
	inits    []*ctr
	mains    []*ctr
	deleting bool
	stopCh   chan struct{}
	done     bool
	conds    map[corev1.PodConditionType]corev1.PodCondition
	lost     bool // killed with its node: reported with PodGC's DisruptionTarget condition
}

func newPodRun(p *Provider, pod *corev1.Pod, dir string) *podRun {
	r := &podRun{p: p, pod: pod, dir: dir, phase: corev1.PodPending, start: now(), stopCh: make(chan struct{}),
		conds: map[corev1.PodConditionType]corev1.PodCondition{}}
	waiting := "ContainerCreating"
	if len(pod.Spec.InitContainers) > 0 {
		waiting = "PodInitializing"
	}
	for _, c := range pod.Spec.InitContainers {
		r.inits = append(r.inits, &ctr{spec: c, init: true, state: waitingState("PodInitializing", "")})
	}
	for _, c := range pod.Spec.Containers {
		r.mains = append(r.mains, &ctr{spec: c, state: waitingState(waiting, "")})
	}
	r.initDone = len(r.inits) == 0
	return r
}

func waitingState(reason, msg string) corev1.ContainerState {
	return corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func (r *podRun) lifecycle(ctx context.Context) {
	defer r.finish()
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		for _, c := range append(r.inits, r.mains...) {
			c.state = waitingState("CreateContainerError", err.Error())
		}
		return
	}
	if raw, err := json.Marshal(&corev1.Pod{ObjectMeta: r.pod.ObjectMeta, Spec: r.pod.Spec}); err == nil {
		_ = os.WriteFile(filepath.Join(r.dir, podFile), raw, 0o644)
	}
	if r.ranBefore() {
		r.mu.Lock()
		for _, c := range append(append([]*ctr{}, r.inits...), r.mains...) {
			c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "Error", Message: "procnode restarted while the container ran", FinishedAt: now(),
			}}
		}
		r.mu.Unlock()
		return
	}
	r.p.changed(r)
	for _, c := range r.inits {
		if !r.runToEnd(ctx, c) {
			return
		}
	}
	r.mu.Lock()
	r.initDone = true
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range r.mains {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.runToEnd(ctx, c)
		}()
	}
	wg.Wait()
}

// runToEnd runs c, restarting it as the pod's restartPolicy says, until it ends for good; true when it
// ended with exit code 0.
func (r *podRun) runToEnd(ctx context.Context, c *ctr) bool {
	for {
		proc, err := r.startOne(ctx, c)
		if errors.Is(err, errDeleted) {
			return false
		}
		var cfgErr *ConfigError
		if errors.As(err, &cfgErr) { // the kubelet's CreateContainerConfigError: retried until fixed
			r.setState(c, waitingState("CreateContainerConfigError", err.Error()))
			if !r.sleep(2 * time.Second) {
				return false
			}
			continue
		}
		code := 128
		if proc != nil {
			code = r.waitOne(c, proc)
		}
		policy := r.pod.Spec.RestartPolicy
		restart := policy == corev1.RestartPolicyAlways || (policy == corev1.RestartPolicyOnFailure && code != 0)
		if c.init && policy == corev1.RestartPolicyAlways {
			restart = code != 0
		}
		r.mu.Lock()
		restart = restart && !r.deleting
		if restart {
			c.last = c.state
			c.restarts++
			c.state = waitingState("CrashLoopBackOff", fmt.Sprintf("back-off restarting container %s", c.spec.Name))
		}
		backoff := time.Duration(c.restarts) * time.Second
		r.mu.Unlock()
		if !restart {
			return code == 0
		}
		r.p.changed(r)
		if !r.sleep(min(backoff, 10*time.Second)) {
			return false
		}
	}
}

// startOne resolves c's env and command and starts it; a command that cannot start leaves c terminated
// with exit code 128, reason StartError (proc and err nil).
func (r *podRun) startOne(ctx context.Context, c *ctr) (*Proc, error) {
	envList, envMap, err := ContainerEnv(ctx, r.pod, &c.spec, r.p.Objects, r.baseEnv())
	if err != nil {
		return nil, err
	}
	dir := c.spec.WorkingDir
	if dir == "" {
		dir = r.dir
	}
	spec := ProcSpec{
		Argv: ExpandArgs(append(append([]string{}, c.spec.Command...), c.spec.Args...), envMap),
		Env:  envList, Dir: dir, Log: filepath.Join(r.dir, c.spec.Name+".log"),
	}
	r.mu.Lock()
	if r.deleting {
		r.mu.Unlock()
		return nil, errDeleted
	}
	if len(c.spec.Command) == 0 {
		spec.Argv = nil // no image entrypoint to run the args with
	}
	proc, err := StartProc(spec)
	t := now()
	if err != nil {
		c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode: 128, Reason: "StartError", Message: err.Error(), StartedAt: t, FinishedAt: t,
		}}
		r.mu.Unlock()
		r.p.changed(r)
		return nil, nil
	}
	c.proc, c.started = proc, true
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(proc.Started)}}
	if !c.init {
		r.phase = corev1.PodRunning
	}
	r.mu.Unlock()
	_ = os.WriteFile(r.pidFile(c), []byte(fmt.Sprintf("%d\n", proc.Pid())), 0o644)
	r.p.Journal.Record(r.pod, c.spec.Name, "start", map[string]any{"pid": proc.Pid()})
	r.p.changed(r)
	return proc, nil
}

func (r *podRun) waitOne(c *ctr, proc *Proc) int {
	res := proc.Wait()
	_ = os.Remove(r.pidFile(c))
	extra := map[string]any{"exit_code": res.ExitCode}
	if res.Signal != "" {
		extra["signal"] = res.Signal
	}
	r.p.Journal.Record(r.pod, c.spec.Name, "exit", extra)
	reason := "Completed"
	if res.ExitCode != 0 {
		reason = "Error"
	}
	r.mu.Lock()
	c.proc = nil
	c.state = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: int32(res.ExitCode), Reason: reason, StartedAt: metav1.NewTime(proc.Started),
		FinishedAt: metav1.NewTime(res.Finished), ContainerID: containerID(proc),
	}}
	r.mu.Unlock()
	r.p.changed(r)
	return res.ExitCode
}

func (r *podRun) pidFile(c *ctr) string { return filepath.Join(r.dir, c.spec.Name+".pid") }

// ranBefore: the API server shows a container of this pod started, so a previous procnode of this node ran
// it. With restartPolicy Never it is not run twice: it fails as a pod on a rebooted node does.
func (r *podRun) ranBefore() bool {
	if r.pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
		return false
	}
	for _, s := range append(append([]corev1.ContainerStatus{}, r.pod.Status.InitContainerStatuses...), r.pod.Status.ContainerStatuses...) {
		if s.State.Running != nil || s.State.Terminated != nil {
			return true
		}
	}
	return false
}

func (r *podRun) baseEnv() map[string]string {
	env := map[string]string{"HOME": r.dir, "HOSTNAME": r.pod.Name}
	for k, v := range r.p.Base {
		env[k] = v
	}
	return env
}

func (r *podRun) setState(c *ctr, s corev1.ContainerState) {
	r.mu.Lock()
	c.state = s
	r.mu.Unlock()
	r.p.changed(r)
}

// sleep waits d; false when the pod is being deleted.
func (r *podRun) sleep(d time.Duration) bool {
	select {
	case <-time.After(d):
		return true
	case <-r.stopCh:
		return false
	}
}

// terminate stops the pod: no more starts or restarts, running processes get SIGTERM and grace, then SIGKILL.
func (r *podRun) terminate(grace time.Duration) {
	r.mu.Lock()
	if !r.deleting {
		r.deleting = true
		close(r.stopCh)
	}
	var running []*ctr
	for _, c := range append(append([]*ctr{}, r.inits...), r.mains...) {
		if c.proc != nil {
			running = append(running, c)
		}
	}
	r.mu.Unlock()
	for _, c := range running {
		name, proc := c.spec.Name, c.proc
		proc.Stop(grace, func(sig string) {
			r.p.Journal.Record(r.pod, name, "signal", map[string]any{"signal": sig, "grace": grace.Seconds()})
		})
	}
}

func (r *podRun) finish() {
	r.mu.Lock()
	phase := corev1.PodSucceeded
	for _, c := range append(append([]*ctr{}, r.inits...), r.mains...) {
		if c.state.Terminated == nil || c.state.Terminated.ExitCode != 0 {
			phase = corev1.PodFailed
		}
	}
	r.phase = phase
	r.done = true
	r.mu.Unlock()
	r.p.changed(r)
}

func (r *podRun) finished() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done
}

func containerID(p *Proc) string { return fmt.Sprintf("procnode://%d", p.Pid()) }

// snapshot is the pod with the status a kubelet would report now.
func (r *podRun) snapshot() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	pod := r.pod.DeepCopy()
	st := &pod.Status
	st.Phase = r.phase
	st.HostIP, st.PodIP = LocalIP, LocalIP
	st.HostIPs = []corev1.HostIP{{IP: LocalIP}}
	st.PodIPs = []corev1.PodIP{{IP: LocalIP}}
	st.StartTime = &r.start
	st.InitContainerStatuses = statuses(r.inits)
	st.ContainerStatuses = statuses(r.mains)
	allRunning := len(r.mains) > 0
	for _, c := range r.mains {
		allRunning = allRunning && c.state.Running != nil
	}
	if r.done {
		allRunning = false
	}
	r.setCondition(st, corev1.PodInitialized, r.initDone)
	r.setCondition(st, corev1.ContainersReady, allRunning)
	r.setCondition(st, corev1.PodReady, allRunning)
	r.keepForeignConditions(st)
	if r.lost {
		r.setCondition(st, corev1.DisruptionTarget, true)
		for i := range st.Conditions {
			if st.Conditions[i].Type == corev1.DisruptionTarget {
				st.Conditions[i].Reason = "DeletionByPodGC"
				st.Conditions[i].Message = "PodGC: node no longer exists"
			}
		}
	}
	return pod
}

func statuses(cs []*ctr) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, 0, len(cs))
	for _, c := range cs {
		started := c.state.Running != nil
		s := corev1.ContainerStatus{
			Name: c.spec.Name, Image: c.spec.Image, ImageID: "procnode://" + c.spec.Image,
			State: *c.state.DeepCopy(), LastTerminationState: *c.last.DeepCopy(), RestartCount: c.restarts,
			Ready: started && !c.init, Started: &started,
		}
		if c.proc != nil {
			s.ContainerID = containerID(c.proc)
		} else if c.state.Terminated != nil {
			s.ContainerID = c.state.Terminated.ContainerID
		}
		out = append(out, s)
	}
	return out
}

// setCondition sets condition t; its transition time is kept in r so that equal states snapshot equal.
// kubeletConditions are the pod conditions the kubelet writes; the others (PodScheduled, DisruptionTarget from
// the Eviction API or the taint manager, readiness gates) belong to other writers and are kept, as the kubelet's
// status manager keeps them. Without this, the status update would drop a DisruptionTarget and the Job
// controller would count an evicted pod as a failure.
var kubeletConditions = map[corev1.PodConditionType]bool{
	corev1.PodReady: true, corev1.ContainersReady: true, corev1.PodInitialized: true,
	corev1.PodReadyToStartContainers: true,
}

// keepForeignConditions copies into st the conditions other writers set on the API server's copy of the pod.
func (r *podRun) keepForeignConditions(st *corev1.PodStatus) {
	if r.p == nil || r.p.Current == nil {
		return
	}
	cur := r.p.Current(r.pod.Namespace, r.pod.Name)
	if cur == nil || cur.UID != r.pod.UID {
		return
	}
	for _, c := range cur.Status.Conditions {
		if kubeletConditions[c.Type] {
			continue
		}
		replaced := false
		for i := range st.Conditions {
			if st.Conditions[i].Type == c.Type {
				st.Conditions[i], replaced = c, true
			}
		}
		if !replaced {
			st.Conditions = append(st.Conditions, c)
		}
	}
}

func (r *podRun) setCondition(st *corev1.PodStatus, t corev1.PodConditionType, ok bool) {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	prev, seen := r.conds[t]
	if !seen || prev.Status != status {
		prev = corev1.PodCondition{Type: t, Status: status, LastTransitionTime: now()}
		r.conds[t] = prev
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			st.Conditions[i] = prev
			return
		}
	}
	st.Conditions = append(st.Conditions, prev)
}
