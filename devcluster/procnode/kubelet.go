package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/node/api"
	corev1 "k8s.io/api/core/v1"
)

// KubeletAPI is the part of the kubelet's HTTPS API a process node serves, on LocalIP only: container logs
// (GET /containerLogs/<namespace>/<pod>/<container>, the API server's pods/log) and the pod lists (/pods,
// /runningpods/). exec, attach and portForward answer 501. virtual-kubelet's api package parses the
// requests and writes the answers; the provider reads the logs.
//
// It authenticates no client, as a kubelet with anonymous auth would not: it listens on the loopback address
// only, where the API server (and anyone on this machine) reaches it. The API server checks nothing of its
// certificate either: the bed's kube-apiserver has no --kubelet-certificate-authority, so it does not verify
// a kubelet's serving certificate (k8s.io/kubernetes/pkg/kubelet/client: no CA, TLS without verification).
type KubeletAPI struct {
	Provider *Provider
	// FromAPIServer lists the pods bound to this node as the API server has them (/pods).
	FromAPIServer func(context.Context) ([]*corev1.Pod, error)
}

// Handler routes the kubelet paths to the provider.
func (k KubeletAPI) Handler() http.Handler {
	mux := http.NewServeMux()
	api.AttachPodRoutes(api.PodHandlerConfig{
		GetContainerLogs:      k.Provider.GetContainerLogs,
		GetPods:               k.Provider.GetPods,
		GetPodsFromKubernetes: k.FromAPIServer,
	}, mux, true)
	return withExplicitTailZero(mux)
}

// Serve answers HTTPS on ln with a certificate of its own until ctx ends.
func (k KubeletAPI) Serve(ctx context.Context, ln net.Listener, cert tls.Certificate) error {
	srv := &http.Server{
		Handler:           k.Handler(),
		ReadHeaderTimeout: 10 * time.Second, // no write timeout: a followed log streams while its container runs
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	err := srv.ServeTLS(ln, "", "")
	if errors.Is(err, http.ErrServerClosed) && ctx.Err() != nil {
		return nil
	}
	return err
}

// servingCertValidity is how long the kubelet API's self-signed certificate is valid (a procnode restarts
// long before).
const servingCertValidity = 365 * 24 * time.Hour

// SelfSignedServingCert makes the kubelet API's serving certificate at start: an ECDSA P-256 key, a
// certificate signed by itself for LocalIP (and localhost, and the node's name), valid a year. Nothing
// verifies it (see KubeletAPI); a kubelet without --tls-cert-file makes one the same way.
func SelfSignedServingCert(nodeName string, now time.Time) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", nodeName, now.Unix())},
		NotBefore:             now.Add(-time.Hour), // a little clock skew
		NotAfter:              now.Add(servingCertValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IPAddresses:           []net.IP{net.ParseIP(LocalIP)},
		DNSNames:              []string{"localhost", nodeName},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}
