package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
)

// GetContainerLogs serves a container's log as the kubelet's /containerLogs does (virtual-kubelet's
// api.ContainerLogsHandlerFunc): the file its stdout and stderr are appended to, <pod dir>/<container>.log.
//
//   - tailLines: the last N lines, found by reading the file backwards from its end (a last line without
//     its newline counts as a line); tailLines=0 is nothing (see withExplicitTailZero).
//   - limitBytes: at most that many bytes, the first ones of what tailLines selected.
//   - follow: what exists, then what the running container appends, until it exits (or the client goes).
//   - previous, timestamps, sinceSeconds, sinceTime: not supported (400): every run of a container appends
//     to the same file, and its lines carry no time.
//
// A pod or container the node does not know is a NotFound (404). A pod stays known until it is deleted
// from the node (a finished pod is kept until then), and one the API server still has bound here whose
// directory exists is served from disk too: a pod that ended before this procnode restarted is never
// handed to it again by virtual-kubelet, but its log is still there. A container that has not started
// yet has no log: 400, as the kubelet answers for a waiting container.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	switch {
	case opts.Previous:
		return nil, errdefs.InvalidInput("previous: not supported by a process node (every run of a container appends to one log)")
	case opts.Timestamps:
		return nil, errdefs.InvalidInput("timestamps: not supported by a process node (its log lines carry no time)")
	case opts.SinceSeconds > 0 || !opts.SinceTime.IsZero():
		return nil, errdefs.InvalidInput("sinceSeconds/sinceTime: not supported by a process node (its log lines carry no time)")
	}
	path, running, err := p.logSource(namespace, podName, containerName)
	if err != nil {
		return nil, err
	}
	tail := -1 // all of it
	if opts.Tail > 0 {
		tail = opts.Tail
	} else if explicitTailZero(ctx) {
		tail = 0
	}
	if !opts.Follow {
		running = nil
	}
	rc, err := openLog(ctx, path, tail, opts.LimitBytes, running)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, errdefs.InvalidInputf("container %q in pod %q is waiting to start: no log yet", containerName, podName)
	}
	return rc, err
}

// logSource is the log file of a container of a pod this node knows, and whether that container runs now.
func (p *Provider) logSource(namespace, podName, container string) (string, func() bool, error) {
	p.mu.Lock()
	run, ok := p.pods[key(namespace, podName)]
	current := p.Current
	p.mu.Unlock()
	if ok {
		c := run.container(container)
		if c == nil {
			return "", nil, errdefs.NotFoundf("container %q not found in pod %s/%s", container, namespace, podName)
		}
		return filepath.Join(run.dir, container+".log"), func() bool { return run.running(c) }, nil
	}
	if current != nil {
		if pod := current(namespace, podName); pod != nil && pod.Spec.NodeName == p.NodeName {
			if !hasContainer(pod, container) {
				return "", nil, errdefs.NotFoundf("container %q not found in pod %s/%s", container, namespace, podName)
			}
			if st, err := os.Stat(p.podDir(pod)); err == nil && st.IsDir() {
				return filepath.Join(p.podDir(pod), container+".log"), func() bool { return false }, nil
			}
		}
	}
	return "", nil, errdefs.NotFoundf("pod %s/%s not found in procnode %s", namespace, podName, p.NodeName)
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, c := range append(append([]corev1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if c.Name == name {
			return true
		}
	}
	return false
}

// container is the init container or container called name, or nil.
func (r *podRun) container(name string) *ctr {
	for _, c := range append(append([]*ctr{}, r.inits...), r.mains...) {
		if c.spec.Name == name {
			return c
		}
	}
	return nil
}

// running: c's process runs now.
func (r *podRun) running(c *ctr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return c.proc != nil
}

// tailBlock is how much of the log tailStart reads at a time, backwards from its end.
const tailBlock = 32 << 10

// openLog opens the log at path: the last tail lines (all of it when tail < 0), at most limit bytes of them
// (no limit when limit <= 0). With running set it follows the file while running() is true, polling for
// what is appended, and ends at the end of the file once the process has ended or ctx is done.
func openLog(ctx context.Context, path string, tail, limit int, running func() bool) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	size := st.Size()
	start := int64(0)
	switch {
	case tail == 0:
		start = size
	case tail > 0:
		if start, err = tailStart(f, size, tail, tailBlock); err != nil {
			_ = f.Close()
			return nil, err
		}
	}
	var r io.Reader
	if running == nil {
		r = io.NewSectionReader(f, start, size-start) // what the log held when asked
	} else {
		r = &followReader{ctx: ctx, f: f, off: start, running: running, poll: followPoll}
	}
	if limit > 0 {
		r = io.LimitReader(r, int64(limit))
	}
	return readCloser{r, f}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// tailStart is the offset of the first of the last n (> 0) lines of the size bytes of r, reading block bytes at
// a time from the end: a large log is never read whole. A final newline ends the last line; a last line
// without one is a line too. Fewer than n lines: 0.
func tailStart(r io.ReaderAt, size int64, n, block int) (int64, error) {
	if size == 0 {
		return 0, nil
	}
	end := size
	var last [1]byte
	if _, err := r.ReadAt(last[:], size-1); err != nil {
		return 0, err
	}
	if last[0] == '\n' {
		end-- // it ends the last line, it does not start one
	}
	buf := make([]byte, block)
	found := 0
	for end > 0 {
		from := max(end-int64(block), 0)
		chunk := buf[:end-from]
		if _, err := r.ReadAt(chunk, from); err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		for i := len(chunk); i > 0; {
			j := bytes.LastIndexByte(chunk[:i], '\n')
			if j < 0 {
				break
			}
			if found++; found == n {
				return from + int64(j) + 1, nil
			}
			i = j
		}
		end = from
	}
	return 0, nil
}

// followPoll is how often a followed log is read again at its end.
const followPoll = 200 * time.Millisecond

// followReader reads a log from off on, waiting at its end while running() holds; once the process has
// ended it reads what is left and ends.
type followReader struct {
	ctx     context.Context
	f       *os.File
	off     int64
	running func() bool
	poll    time.Duration
	ended   bool
}

func (r *followReader) Read(b []byte) (int, error) {
	for {
		n, err := r.f.ReadAt(b, r.off)
		r.off += int64(n)
		if n > 0 {
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if r.ended {
			return 0, io.EOF
		}
		if !r.running() {
			r.ended = true // its output is all written: read to the end once more
			continue
		}
		select {
		case <-r.ctx.Done():
			return 0, io.EOF
		case <-time.After(r.poll):
		}
	}
}

type tailZeroKey struct{}

// withExplicitTailZero marks a request with tailLines=0 in its context: virtual-kubelet's ContainerLogOpts
// has Tail 0 both for tailLines=0 (the kubelet answers nothing) and for no tailLines (all of the log).
func withExplicitTailZero(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if v := req.URL.Query().Get("tailLines"); v != "" {
			if n, err := strconv.Atoi(v); err == nil && n == 0 {
				req = req.WithContext(context.WithValue(req.Context(), tailZeroKey{}, true))
			}
		}
		h.ServeHTTP(w, req)
	})
}

func explicitTailZero(ctx context.Context) bool {
	v, _ := ctx.Value(tailZeroKey{}).(bool)
	return v
}
