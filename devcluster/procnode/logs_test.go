package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/errdefs"
	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func numbered(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return b.String()
}

func readLog(t *testing.T, path string, tail, limit int) string {
	t.Helper()
	rc, err := openLog(context.Background(), path, tail, limit, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestOpenLogTailAndLimitTable(t *testing.T) {
	ten := numbered(10)
	cases := []struct {
		name        string
		content     string
		tail, limit int // tail -1: all; limit 0: none
		want        string
	}{
		{"all", ten, -1, 0, ten},
		{"tail 3", ten, 3, 0, "line 8\nline 9\nline 10\n"},
		{"tail 1", ten, 1, 0, "line 10\n"},
		{"tail bigger than the file", ten, 50, 0, ten},
		{"tail equal to the lines", ten, 10, 0, ten},
		{"tail 0", ten, 0, 0, ""},
		{"limit alone: the first bytes", ten, -1, 8, "line 1\nl"},
		{"limit smaller than the tail: its first bytes", ten, 3, 5, "line "},
		{"limit bigger than the tail", ten, 2, 1000, "line 9\nline 10\n"},
		{"no trailing newline: the last line counts", "a\nb\nc", 1, 0, "c"},
		{"no trailing newline, tail 2", "a\nb\nc", 2, 0, "b\nc"},
		{"no newline at all", "just one", 1, 0, "just one"},
		{"empty lines are lines", "x\n\n\n", 2, 0, "\n\n"},
		{"only a newline", "\n", 1, 0, "\n"},
		{"empty file", "", 5, 0, ""},
		{"empty file, limit", "", -1, 3, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "main.log")
			if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := readLog(t, path, c.tail, c.limit); got != c.want {
				t.Fatalf("tail %d limit %d: got %q, want %q", c.tail, c.limit, got, c.want)
			}
		})
	}
}

// tailStart finds the same line starts whatever its block size (lines across block boundaries).
func TestTailStartAcrossBlocks(t *testing.T) {
	content := []byte(numbered(100) + "no newline")
	lines := strings.SplitAfter(string(content), "\n")
	for _, block := range []int{1, 2, 3, 7, 64, tailBlock} {
		for n := 1; n <= len(lines)+2; n++ {
			got, err := tailStart(bytes.NewReader(content), int64(len(content)), n, block)
			if err != nil {
				t.Fatal(err)
			}
			want := len(content) - len(strings.Join(lines[max(len(lines)-n, 0):], ""))
			if got != int64(want) {
				t.Fatalf("block %d, n %d: %d, want %d", block, n, got, want)
			}
		}
	}
}

type countingReaderAt struct {
	r    io.ReaderAt
	read atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.read.Add(int64(n))
	return n, err
}

// A large log's tail is found from its end: a few blocks are read, not the file.
func TestTailOfALargeLogReadsOnlyItsEnd(t *testing.T) {
	content := []byte(numbered(400_000)) // ~5 MB
	r := &countingReaderAt{r: bytes.NewReader(content)}
	start, err := tailStart(r, int64(len(content)), 5, tailBlock)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(content[start:]); got != "line 399996\nline 399997\nline 399998\nline 399999\nline 400000\n" {
		t.Fatalf("tail %q", got)
	}
	if r.read.Load() > 2*tailBlock {
		t.Fatalf("read %d bytes of %d for a 5-line tail", r.read.Load(), len(content))
	}
}

func logOpts(tail, limit int) api.ContainerLogOpts {
	return api.ContainerLogOpts{Tail: tail, LimitBytes: limit}
}

func readAll(t *testing.T, rc io.ReadCloser, err error) string {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestGetContainerLogsOfAFinishedPodUntilItIsDeleted(t *testing.T) {
	p, s := newTestProvider(t)
	ctx := context.Background()
	pod := shPod("done", corev1.RestartPolicyNever, `i=1; while [ $i -le 300 ]; do echo "n=$i"; i=$((i+1)); done; exit 1`, `echo other >&2`)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	s.wait(t, "done", phase(corev1.PodFailed))
	rc, err := p.GetContainerLogs(ctx, "ns", "done", "a", logOpts(5, 0))
	if got := readAll(t, rc, err); got != "n=296\nn=297\nn=298\nn=299\nn=300\n" {
		t.Fatalf("tail 5: %q", got)
	}
	rc, err = p.GetContainerLogs(ctx, "ns", "done", "a", logOpts(0, 10))
	if got := readAll(t, rc, err); got != "n=1\nn=2\nn=" {
		t.Fatalf("limit 10: %q", got)
	}
	rc, err = p.GetContainerLogs(ctx, "ns", "done", "b", logOpts(0, 0))
	if got := readAll(t, rc, err); got != "other\n" {
		t.Fatalf("container b (stderr): %q", got)
	}
	for _, c := range []struct{ pod, container string }{{"done", "nope"}, {"unknown", "a"}} {
		if _, err := p.GetContainerLogs(ctx, "ns", c.pod, c.container, logOpts(0, 0)); !errdefs.IsNotFound(err) {
			t.Fatalf("%s/%s: %v, want a NotFound", c.pod, c.container, err)
		}
	}
	// Deleted from the node (the API server no longer has it): forgotten, its log with it.
	if err := p.DeletePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetContainerLogs(ctx, "ns", "done", "a", logOpts(0, 0)); !errdefs.IsNotFound(err) {
		t.Fatalf("after deletion: %v, want a NotFound", err)
	}
	// ... unless the API server still has it bound here (a procnode that restarted after it ended is not
	// handed it again): then its directory is read.
	p.Current = func(ns, name string) *corev1.Pod {
		if ns == "ns" && name == "done" {
			bound := pod.DeepCopy()
			bound.Spec.NodeName = p.NodeName
			return bound
		}
		return nil
	}
	rc, err = p.GetContainerLogs(ctx, "ns", "done", "a", logOpts(1, 0))
	if got := readAll(t, rc, err); got != "n=300\n" {
		t.Fatalf("from disk: %q", got)
	}
	other := pod.DeepCopy()
	other.UID = types.UID("another-uid")
	p.Current = func(string, string) *corev1.Pod { o := other.DeepCopy(); o.Spec.NodeName = p.NodeName; return o }
	if _, err := p.GetContainerLogs(ctx, "ns", "done", "a", logOpts(0, 0)); !errdefs.IsNotFound(err) {
		t.Fatalf("another pod of that name, never run here: %v, want a NotFound", err)
	}
}

func TestGetContainerLogsRefusesWhatItCannotDo(t *testing.T) {
	p, s := newTestProvider(t)
	ctx := context.Background()
	_ = p.CreatePod(ctx, shPod("w", corev1.RestartPolicyNever, "echo hi"))
	s.wait(t, "w", phase(corev1.PodSucceeded))
	for name, opts := range map[string]api.ContainerLogOpts{
		"previous":     {Previous: true},
		"timestamps":   {Timestamps: true},
		"sinceSeconds": {SinceSeconds: 10},
		"sinceTime":    {SinceTime: time.Now()},
	} {
		if _, err := p.GetContainerLogs(ctx, "ns", "w", "a", opts); !errdefs.IsInvalidInput(err) {
			t.Errorf("%s: %v, want an InvalidInput (400)", name, err)
		}
	}
	// A container that has not started has no log file yet: 400, as the kubelet says "waiting to start".
	if err := os.Remove(filepath.Join(p.podDir(shPod("w", "")), "a.log")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetContainerLogs(ctx, "ns", "w", "a", logOpts(0, 0)); !errdefs.IsInvalidInput(err) {
		t.Fatalf("no log yet: %v, want an InvalidInput", err)
	}
}

func TestFollowStreamsUntilTheContainerEnds(t *testing.T) {
	p, s := newTestProvider(t)
	ctx := context.Background()
	_ = p.CreatePod(ctx, shPod("f", corev1.RestartPolicyNever, "echo first; sleep 0.6; echo second; sleep 0.3; echo third"))
	s.wait(t, "f", phase(corev1.PodRunning))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if data, _ := os.ReadFile(filepath.Join(p.podDir(shPod("f", "")), "a.log")); len(data) > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	t0 := time.Now()
	rc, err := p.GetContainerLogs(ctx, "ns", "f", "a", api.ContainerLogOpts{Follow: true})
	if got := readAll(t, rc, err); got != "first\nsecond\nthird\n" {
		t.Fatalf("followed %q", got)
	}
	if took := time.Since(t0); took < 500*time.Millisecond {
		t.Fatalf("follow returned after %s, before the container ended", took)
	}
	// A client that goes away ends the stream.
	_ = p.CreatePod(ctx, shPod("g", corev1.RestartPolicyNever, "echo up; sleep 30"))
	s.wait(t, "g", phase(corev1.PodRunning))
	cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	rc, err = p.GetContainerLogs(cctx, "ns", "g", "a", api.ContainerLogOpts{Follow: true})
	_ = readAll(t, rc, err)
	if cctx.Err() == nil {
		t.Fatal("follow of a running container ended before its client went")
	}
	p.KillAll()
	s.wait(t, "g", phase(corev1.PodFailed)) // its goroutines are done before the temp dir goes
}

// The kubelet paths over HTTPS, as the API server asks them: virtual-kubelet's api package parses the query
// (tailLines, limitBytes) and turns a NotFound into 404.
func TestKubeletAPIServesLogsOverTLS(t *testing.T) {
	p, s := newTestProvider(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = p.CreatePod(ctx, shPod("h", corev1.RestartPolicyNever, `for i in 1 2 3 4 5 6; do echo "l$i"; done; exit 1`))
	s.wait(t, "h", phase(corev1.PodFailed))
	ln, err := net.Listen("tcp", net.JoinHostPort(LocalIP, "0"))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := SelfSignedServingCert("proc-test", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- (KubeletAPI{Provider: p}).Serve(ctx, ln, cert) }()
	roots := x509.NewCertPool()
	roots.AddCert(cert.Leaf) // this test checks the certificate too; the API server does not
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}, Timeout: 10 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("https://" + ln.Addr().String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	for _, c := range []struct {
		path string
		code int
		body string
	}{
		{"/containerLogs/ns/h/a?tailLines=2", 200, "l5\nl6\n"},
		{"/containerLogs/ns/h/a?tailLines=2&limitBytes=4", 200, "l5\nl"},
		{"/containerLogs/ns/h/a", 200, "l1\nl2\nl3\nl4\nl5\nl6\n"},
		{"/containerLogs/ns/h/a?tailLines=0", 200, ""},
		{"/containerLogs/ns/nope/a", 404, ""},
		{"/containerLogs/ns/h/nope", 404, ""},
		{"/containerLogs/ns/h/a?timestamps=true", 400, ""},
		{"/exec/ns/h/a", 501, ""},
	} {
		code, body := get(c.path)
		if code != c.code || (c.code == 200 && body != c.body) {
			t.Errorf("%s: %d %q, want %d %q", c.path, code, body, c.code, c.body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}

func TestSelfSignedServingCert(t *testing.T) {
	now := time.Now()
	cert, err := SelfSignedServingCert("proc-spot-0", now)
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")) {
		t.Fatalf("IP SANs %v", leaf.IPAddresses)
	}
	if d := leaf.NotAfter.Sub(now); d < 364*24*time.Hour || d > 366*24*time.Hour {
		t.Fatalf("valid for %s", d)
	}
	if leaf.PublicKeyAlgorithm != x509.ECDSA || leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) != nil {
		t.Fatalf("not a self-signed ECDSA certificate: %v", leaf.PublicKeyAlgorithm)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool(leaf), DNSName: "127.0.0.1", CurrentTime: now}); err != nil {
		t.Fatalf("verify for 127.0.0.1: %v", err)
	}
}

func pool(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

func TestNodeTemplatePublishesTheKubeletPort(t *testing.T) {
	node := NodeTemplate(NodeShape{Name: "proc-spot-1", CPU: "4", Memory: "16Gi", Pods: "32", KubeletPort: 20301})
	if got := node.Status.DaemonEndpoints.KubeletEndpoint.Port; got != 20301 {
		t.Fatalf("kubelet port %d", got)
	}
	addrs := map[corev1.NodeAddressType]string{}
	for _, a := range node.Status.Addresses {
		addrs[a.Type] = a.Address
	}
	// The API server's default --kubelet-preferred-address-types try Hostname first: it must resolve here.
	if addrs[corev1.NodeHostName] != "localhost" || addrs[corev1.NodeInternalIP] != LocalIP {
		t.Fatalf("addresses %v", addrs)
	}
	if node.Labels["kubernetes.io/hostname"] != "proc-spot-1" {
		t.Fatalf("hostname label %q", node.Labels["kubernetes.io/hostname"])
	}
}
