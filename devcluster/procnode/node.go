package main

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// NodeShape is the Node object a process node registers: its labels, taints and allocatable resources.
type NodeShape struct {
	Name                 string
	CPU, Memory, Pods    string
	Zone, KubeletVersion string
	// KubeletPort is where the node serves the kubelet API (KubeletAPI) on LocalIP; 0: it serves none.
	KubeletPort int32
}

// NodeHostname is the node's Hostname address: the API server reaches a kubelet (pods/log) at the first
// address of its --kubelet-preferred-address-types, Hostname first by default (the bed's kube-apiserver sets
// none), and a process node's name resolves nowhere. Its host is this machine, so localhost. The
// kubernetes.io/hostname label stays the node's name: each node is a topology domain of its own.
const NodeHostname = "localhost"

// NodeTemplate is the Node as the contract in docs/process-node.md gives it (a spot node of the process pool).
func NodeTemplate(s NodeShape) *corev1.Node {
	res := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse(s.CPU),
		corev1.ResourceMemory: resource.MustParse(s.Memory),
		corev1.ResourcePods:   resource.MustParse(s.Pods),
	}
	t := metav1.Now()
	cond := func(ct corev1.NodeConditionType, st corev1.ConditionStatus, reason string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: ct, Status: st, Reason: reason, LastHeartbeatTime: t, LastTransitionTime: t}
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: s.Name,
			Labels: map[string]string{
				"type":                                  "process",
				"airflow-kueue.io/node-kind":            "process",
				"kubernetes.io/hostname":                s.Name,
				"kubernetes.azure.com/scalesetpriority": "spot",
				"topology.kubernetes.io/zone":           s.Zone,
				"kubernetes.io/os":                      "linux",
				"kubernetes.io/arch":                    "amd64",
				"node.kubernetes.io/exclude-from-external-load-balancers": "true",
			},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{
			{Key: "airflow-kueue.io/process-node", Value: "true", Effect: corev1.TaintEffectNoSchedule},
			{Key: "kubernetes.azure.com/scalesetpriority", Value: "spot", Effect: corev1.TaintEffectNoSchedule},
		}},
		Status: corev1.NodeStatus{
			Capacity:    res,
			Allocatable: res.DeepCopy(),
			Phase:       corev1.NodeRunning,
			Conditions: []corev1.NodeCondition{
				cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady"),
				cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory"),
				cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure"),
				cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID"),
				cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated"),
			},
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: LocalIP},
				{Type: corev1.NodeHostName, Address: NodeHostname},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: s.KubeletPort}},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: "linux", Architecture: "amd64", KubeletVersion: s.KubeletVersion,
				ContainerRuntimeVersion: "procnode://local-processes",
			},
		},
	}
}

// Registrar puts the Node back when it is deleted (AKS deletes an evicted spot VM's Node; the bed keeps its
// pool), after killing what ran on it: a deleted node's VM is gone with its processes.
type Registrar struct {
	Client   kubernetes.Interface
	Shape    NodeShape
	Provider *Provider
}

// NodeLost SIGKILLs every pod of the node, force-deletes them as PodGC does for a gone node, and registers
// the Node again.
func (r *Registrar) NodeLost(ctx context.Context) {
	pods := r.Provider.KillAll()
	klog.Infof("node %s deleted: killed %d pods", r.Shape.Name, len(pods))
	zero := int64(0)
	for _, pod := range pods {
		opts := metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID))}
		err := r.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			klog.Warningf("delete pod %s/%s of the lost node: %v (retried)", pod.Namespace, pod.Name, err)
			go r.deleteUntilDone(ctx, pod, opts)
		}
	}
	r.Register(ctx)
}

// deleteUntilDone retries the deletion of a lost node's pod (the API server may be down as the node goes):
// a pod left Running with no process would hold its Job's index for ever. Once deleting, the Finisher ends it.
func (r *Registrar) deleteUntilDone(ctx context.Context, pod *corev1.Pod, opts metav1.DeleteOptions) {
	for wait := time.Second; ctx.Err() == nil; wait = min(2*wait, 30*time.Second) {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		err := r.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
		if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return
		}
	}
}

// Register creates the Node unless it exists, retrying until it does or ctx ends.
func (r *Registrar) Register(ctx context.Context) {
	for ctx.Err() == nil {
		_, err := r.Client.CoreV1().Nodes().Create(ctx, NodeTemplate(r.Shape), metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			klog.Infof("node %s registered", r.Shape.Name)
			return
		}
		klog.Warningf("register node %s: %v", r.Shape.Name, err)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

// StatusError is the NodeController's status-update error handler: a missing Node is registered again.
func (r *Registrar) StatusError(ctx context.Context, err error) error {
	if !apierrors.IsNotFound(err) {
		return err
	}
	r.NodeLost(ctx)
	return nil
}
