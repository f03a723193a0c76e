package main

import (
	"context"
	"errors"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeObjects struct {
	secrets    map[string]*corev1.Secret
	configMaps map[string]*corev1.ConfigMap
}

var errNotFound = errors.New("not found")

func (f fakeObjects) Secret(_ context.Context, ns, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[ns+"/"+name]; ok {
		return s, nil
	}
	return nil, errNotFound
}

func (f fakeObjects) ConfigMap(_ context.Context, ns, name string) (*corev1.ConfigMap, error) {
	if c, ok := f.configMaps[ns+"/"+name]; ok {
		return c, nil
	}
	return nil, errNotFound
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p", Namespace: "ns", UID: "1234-5678",
			Labels:      map[string]string{"app": "x"},
			Annotations: map[string]string{CompletionIndexAnnotation: "7"},
		},
		Spec: corev1.PodSpec{NodeName: "proc-spot-0", ServiceAccountName: "sa"},
	}
}

var objs = fakeObjects{
	secrets:    map[string]*corev1.Secret{"ns/s": {Data: map[string][]byte{"token": []byte("t0k"), "A": []byte("from-secret")}}},
	configMaps: map[string]*corev1.ConfigMap{"ns/cm": {Data: map[string]string{"mode": "fast", "B": "from-cm"}}},
}

func ptr[T any](v T) *T { return &v }

func TestContainerEnvTable(t *testing.T) {
	field := func(p string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: p}}
	}
	cases := []struct {
		name   string
		env    corev1.EnvVar
		want   string // "" with absent=true: not set
		absent bool
	}{
		{"value", corev1.EnvVar{Name: "V", Value: "plain"}, "plain", false},
		{"expand earlier", corev1.EnvVar{Name: "V", Value: "$(NAME)-$(UNDEFINED)-$$(NAME)-$x"}, "p-$(UNDEFINED)-$(NAME)-$x", false},
		{"expand base", corev1.EnvVar{Name: "V", Value: "$(PYTHONPATH)/x"}, "/repo/x", false},
		{"name", corev1.EnvVar{Name: "V", ValueFrom: field("metadata.name")}, "p", false},
		{"namespace", corev1.EnvVar{Name: "V", ValueFrom: field("metadata.namespace")}, "ns", false},
		{"uid", corev1.EnvVar{Name: "V", ValueFrom: field("metadata.uid")}, "1234-5678", false},
		{"label", corev1.EnvVar{Name: "V", ValueFrom: field("metadata.labels['app']")}, "x", false},
		{"annotation", corev1.EnvVar{Name: "V", ValueFrom: field("metadata.annotations['" + CompletionIndexAnnotation + "']")}, "7", false},
		{"nodeName", corev1.EnvVar{Name: "V", ValueFrom: field("spec.nodeName")}, "proc-spot-0", false},
		{"serviceAccount", corev1.EnvVar{Name: "V", ValueFrom: field("spec.serviceAccountName")}, "sa", false},
		{"podIP", corev1.EnvVar{Name: "V", ValueFrom: field("status.podIP")}, LocalIP, false},
		{"hostIP", corev1.EnvVar{Name: "V", ValueFrom: field("status.hostIP")}, LocalIP, false},
		{"secret", corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token"}}}, "t0k", false},
		{"secret optional absent", corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "nope", Optional: ptr(true)}}}, "", true},
		{"configmap", corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "mode"}}}, "fast", false},
		{"configmap optional missing map", corev1.EnvVar{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Key: "mode", Optional: ptr(true)}}}, "", true},
	}
	base := map[string]string{"PYTHONPATH": "/repo"}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := &corev1.Container{Env: []corev1.EnvVar{{Name: "NAME", ValueFrom: field("metadata.name")}, tc.env}}
			_, env, err := ContainerEnv(context.Background(), testPod(), c, objs, base)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := env["V"]
			if ok == tc.absent || got != tc.want {
				t.Fatalf("V = %q (set %v), want %q (set %v)", got, ok, tc.want, !tc.absent)
			}
		})
	}
}

func TestEnvFromPrefixAndOverride(t *testing.T) {
	c := &corev1.Container{
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}, Optional: ptr(true)}},
		},
		Env: []corev1.EnvVar{{Name: "mode", Value: "slow-$(B)"}},
	}
	list, env, err := ContainerEnv(context.Background(), testPod(), c, objs, map[string]string{"HOME": "/h"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"B": "from-cm", "mode": "slow-from-cm", "S_A": "from-secret", "S_token": "t0k", "HOME": "/h"}
	if !reflect.DeepEqual(env, want) {
		t.Fatalf("env = %v, want %v", env, want)
	}
	if len(list) != len(want) || list[0] != "B=from-cm" {
		t.Fatalf("list = %v", list)
	}
}

func TestMissingRequiredIsConfigError(t *testing.T) {
	for _, c := range []*corev1.Container{
		{Env: []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "nope"}}}}},
		{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "gone"}}}}},
		{Env: []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.bogus"}}}}},
	} {
		_, _, err := ContainerEnv(context.Background(), testPod(), c, objs, nil)
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Fatalf("err = %v, want a ConfigError", err)
		}
	}
}

func TestExpand(t *testing.T) {
	m := MappingFor(map[string]string{"A": "1", "EMPTY": ""})
	for in, want := range map[string]string{
		"$(A)": "1", "$$(A)": "$(A)", "$$": "$", "$": "$", "x$": "x$", "$(A": "$(A", "$(B)": "$(B)",
		"$(EMPTY)x": "x", "a$bc": "a$bc", "$(A)$(A)": "11", "$$$(A)": "$1",
	} {
		if got := Expand(in, m); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
	if got := ExpandArgs([]string{"--i=$(A)", "$(A)"}, map[string]string{"A": "3"}); !reflect.DeepEqual(got, []string{"--i=3", "3"}) {
		t.Errorf("ExpandArgs = %v", got)
	}
}
