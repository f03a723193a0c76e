// Command procnode is a devcluster Node whose pods run as local processes: virtual-kubelet's node package
// keeps the Node, its Lease and the pods' status; Provider runs each container's command+args.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node"
	"github.com/virtual-kubelet/virtual-kubelet/node/nodeutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

type options struct {
	kubeconfig, nodeName, stateDir, repo, healthAddr string
	shape                                            NodeShape
	workers, kubeletPort                             int
}

func main() {
	var o options
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster (required)")
	flag.StringVar(&o.nodeName, "node-name", "proc-spot-0", "Node name")
	flag.StringVar(&o.stateDir, "state-dir", "", "root of the process nodes' state; this node keeps <state-dir>/<node-name> (required)")
	flag.StringVar(&o.repo, "repo", "", "repository root: PYTHONPATH and <repo>/.venv/bin on PATH (required)")
	flag.StringVar(&o.healthAddr, "health-addr", "127.0.0.1:20260", "address of /healthz")
	flag.StringVar(&o.shape.CPU, "cpu", "4", "allocatable cpu")
	flag.StringVar(&o.shape.Memory, "memory", "16Gi", "allocatable memory")
	flag.StringVar(&o.shape.Pods, "pods", "32", "allocatable pods")
	flag.StringVar(&o.shape.Zone, "zone", "westeurope-1", "topology.kubernetes.io/zone label")
	flag.IntVar(&o.workers, "workers", 4, "pod sync workers")
	flag.IntVar(&o.kubeletPort, "kubelet-port", 0, "port of the kubelet API (HTTPS on "+LocalIP+": container logs), "+
		"published in the Node's status.daemonEndpoints; 0: none")
	klog.InitFlags(nil)
	flag.Parse()
	if err := o.validate(); err != nil {
		fmt.Fprintln(os.Stderr, "procnode:", err)
		os.Exit(2)
	}
	o.shape.Name = o.nodeName
	o.shape.KubeletVersion = "v1.36.0-procnode"
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.Errorf("procnode %s: %v", o.nodeName, err)
		os.Exit(1)
	}
}

func (o *options) validate() error {
	var missing []string
	for flagName, v := range map[string]string{"--kubeconfig": o.kubeconfig, "--state-dir": o.stateDir, "--repo": o.repo} {
		if v == "" {
			missing = append(missing, flagName)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: pass them (devcluster/components.py does)", strings.Join(missing, ", "))
	}
	if o.kubeletPort < 0 || o.kubeletPort > 65535 {
		return fmt.Errorf("--kubelet-port %d: give a port (0 for no kubelet API)", o.kubeletPort)
	}
	o.shape.KubeletPort = int32(o.kubeletPort)
	return nil
}

func run(ctx context.Context, o options) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("--kubeconfig %s: %w", o.kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	dir := filepath.Join(o.stateDir, o.nodeName)
	base := map[string]string{
		"PATH":       filepath.Join(o.repo, ".venv", "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"PYTHONPATH": o.repo,
	}
	provider, err := NewProvider(o.nodeName, dir, base, apiObjects{client})
	if err != nil {
		return err
	}
	// The kubelet API's port is taken before the Node names it: a port in use stops the start here.
	var kubeletLn net.Listener
	if o.kubeletPort > 0 {
		addr := net.JoinHostPort(LocalIP, strconv.Itoa(o.kubeletPort))
		if kubeletLn, err = net.Listen("tcp", addr); err != nil {
			return fmt.Errorf("kubelet API on %s: %w", addr, err)
		}
	}
	provider.KillLeftovers()
	defer provider.KillAll() // a stopped node's processes end with it, as a VM's would
	reg := &Registrar{Client: client, Shape: o.shape, Provider: provider}

	nc, err := node.NewNodeController(node.NewNaiveNodeProvider(), NodeTemplate(o.shape), client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(nodeutil.NodeLeaseV1Client(client), 40),
		node.WithNodeStatusUpdateInterval(10*time.Second),
		node.WithNodeStatusUpdateErrorHandler(reg.StatusError))
	if err != nil {
		return err
	}
	podInformers := informers.NewSharedInformerFactoryWithOptions(client, time.Minute, nodeutil.PodInformerFilter(o.nodeName))
	others := informers.NewSharedInformerFactory(client, 10*time.Minute)
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "procnode", Host: o.nodeName})
	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: podInformers.Core().V1().Pods(), EventRecorder: recorder,
		Provider: provider, ConfigMapInformer: others.Core().V1().ConfigMaps(),
		SecretInformer: others.Core().V1().Secrets(), ServiceInformer: others.Core().V1().Services(),
		SkipDownwardAPIResolution: true, // env.go resolves as the kubelet does, at each container start
	})
	if err != nil {
		return err
	}
	podLister := podInformers.Core().V1().Pods().Lister()
	provider.Current = func(namespace, name string) *corev1.Pod {
		pod, err := podLister.Pods(namespace).Get(name)
		if err != nil {
			return nil
		}
		return pod
	}
	podInformers.Start(ctx.Done())
	others.Start(ctx.Done())
	watchNodeDeletion(ctx, client, o.nodeName, reg)

	go func() {
		if err := nc.Run(ctx); err != nil && ctx.Err() == nil {
			klog.Errorf("node controller: %v", err)
			os.Exit(1)
		}
	}()
	select {
	case <-nc.Ready():
	case <-ctx.Done():
		return nil
	}
	go func() {
		if err := pc.Run(ctx, o.workers); err != nil && ctx.Err() == nil {
			klog.Errorf("pod controller: %v", err)
			os.Exit(1)
		}
	}()
	finisher := &Finisher{Provider: provider, Pods: client.CoreV1(), Bound: func() []*corev1.Pod {
		pods, _ := podLister.List(labels.Everything()) // the informer holds only this node's pods
		return pods
	}}
	go finisher.Run(ctx, sweepEvery)
	go serveHealth(ctx, o.healthAddr, nc, pc)
	if kubeletLn != nil {
		go serveKubeletAPI(ctx, kubeletLn, KubeletAPI{Provider: provider, FromAPIServer: func(context.Context) ([]*corev1.Pod, error) {
			return podLister.List(labels.Everything())
		}}, o.nodeName)
	}
	klog.Infof("procnode %s up: pods under %s", o.nodeName, dir)
	<-ctx.Done()
	return nil
}

// watchNodeDeletion calls reg.NodeLost as soon as the Node object is deleted (not a minute later at the next
// status update).
func watchNodeDeletion(ctx context.Context, client kubernetes.Interface, name string, reg *Registrar) {
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
	}))
	_, _ = f.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(any) { go reg.NodeLost(ctx) },
	})
	f.Start(ctx.Done())
}

func serveHealth(ctx context.Context, addr string, nc *node.NodeController, pc *node.PodController) {
	ready := func() bool {
		select {
		case <-pc.Ready():
			return true
		default:
			return false
		}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "pod controller not ready", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); err != nil && ctx.Err() == nil {
		klog.Errorf("health server %s: %v", addr, err)
		os.Exit(1)
	}
}

func serveKubeletAPI(ctx context.Context, ln net.Listener, k KubeletAPI, nodeName string) {
	cert, err := SelfSignedServingCert(nodeName, time.Now())
	if err == nil {
		klog.Infof("kubelet API on https://%s (self-signed, until %s)", ln.Addr(), cert.Leaf.NotAfter.Format(time.RFC3339))
		err = k.Serve(ctx, ln, cert)
	}
	if err != nil && ctx.Err() == nil {
		klog.Errorf("kubelet API %s: %v", ln.Addr(), err)
		os.Exit(1)
	}
}

// apiObjects reads Secrets and ConfigMaps straight from the API server, so a pod created right after its
// Secret never sees a stale cache.
type apiObjects struct{ client kubernetes.Interface }

func (a apiObjects) Secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return a.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (a apiObjects) ConfigMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return a.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}
