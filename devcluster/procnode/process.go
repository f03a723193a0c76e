package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ProcSpec is one container run as a local process.
type ProcSpec struct {
	Argv []string
	Env  []string // KEY=value
	Dir  string
	Log  string // stdout and stderr, appended
}

// StartError is a container command that could not be started (the kubelet's StartError, exit code 128).
type StartError struct{ Err error }

func (e *StartError) Error() string { return e.Err.Error() }

// Proc is a running container process, leader of its own process group so that signals reach everything
// it started, as a container's cgroup would.
type Proc struct {
	cmd     *exec.Cmd
	done    chan struct{}
	Started time.Time

	mu       sync.Mutex
	exited   bool
	termSent bool
	killSent bool
	deadline time.Time
	timer    *time.Timer
	result   Result
}

// Result is how a process ended.
type Result struct {
	ExitCode int
	Signal   string // set when a signal ended it
	Finished time.Time
}

// StartProc starts spec's command; a command that cannot be found or executed is a *StartError.
func StartProc(spec ProcSpec) (*Proc, error) {
	if len(spec.Argv) == 0 {
		return nil, &StartError{errors.New("container has no command: a process node runs command+args, it has no images")}
	}
	path, err := lookPath(spec.Argv[0], spec.Env, spec.Dir)
	if err != nil {
		return nil, &StartError{err}
	}
	logFile, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, &StartError{fmt.Errorf("open log: %w", err)}
	}
	defer logFile.Close()
	cmd := &exec.Cmd{Path: path, Args: spec.Argv, Env: spec.Env, Dir: spec.Dir, Stdout: logFile, Stderr: logFile}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, &StartError{err}
	}
	p := &Proc{cmd: cmd, done: make(chan struct{}), Started: time.Now()}
	go p.wait()
	return p, nil
}

// lookPath finds name on the PATH of the child's env (not this process's), relative to dir when it has a slash.
func lookPath(name string, env []string, dir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("exec %q: %w", name, err)
		}
		return p, nil
	}
	pathEnv := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathEnv = v
		}
	}
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			continue
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("exec %q: executable file not found in $PATH (%s)", name, pathEnv)
}

func executable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() || st.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: permission denied", p)
	}
	return nil
}

func (p *Proc) wait() {
	_ = p.cmd.Wait()
	res := Result{Finished: time.Now()}
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
		res.Signal = signalName(ws.Signal())
	} else {
		res.ExitCode = p.cmd.ProcessState.ExitCode()
	}
	// The container ends with its main process: what it left behind in its group goes too.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	p.mu.Lock()
	p.exited = true
	p.result = res
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	close(p.done)
}

// Pid is the process (and process group) id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Wait blocks until the process exits and returns how it ended.
func (p *Proc) Wait() Result {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.result
}

// Stop asks the process group to end as a kubelet does: SIGTERM now, SIGKILL when grace has passed (grace
// 0: SIGKILL at once, no SIGTERM). A later call with an earlier deadline moves the SIGKILL forward; a later
// one never delays it. onSignal is told of each signal sent.
func (p *Proc) Stop(grace time.Duration, onSignal func(sig string)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited || p.killSent {
		return
	}
	deadline := time.Now().Add(grace)
	if grace <= 0 {
		p.killLocked(onSignal)
		return
	}
	if !p.termSent {
		p.termSent = true
		_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
		onSignal("SIGTERM")
	}
	if p.timer != nil && !deadline.Before(p.deadline) {
		return
	}
	if p.timer != nil {
		p.timer.Stop()
	}
	p.deadline = deadline
	p.timer = time.AfterFunc(grace, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if !p.exited && !p.killSent {
			p.killLocked(onSignal)
		}
	})
}

func (p *Proc) killLocked(onSignal func(sig string)) {
	p.killSent = true
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	onSignal("SIGKILL")
}

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return fmt.Sprintf("signal %d", int(s))
}
