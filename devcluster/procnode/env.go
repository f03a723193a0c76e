package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Objects gives the Secrets and ConfigMaps an env resolution reads; the node passes informer listers, the
// unit tests a map.
type Objects interface {
	Secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	ConfigMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
}

// ConfigError is a container configuration the kubelet would refuse with CreateContainerConfigError (a
// missing Secret key, an unsupported fieldRef): the container waits and the resolution is retried.
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

func configErr(format string, args ...any) error { return &ConfigError{fmt.Sprintf(format, args...)} }

// ContainerEnv resolves a container's environment as the kubelet does: envFrom sources in order, then env
// entries (later ones win), each value `$(VAR)`-expanded against what was defined before it and the base
// env. The result is base overlaid with the container's variables, as sorted KEY=value strings.
func ContainerEnv(ctx context.Context, pod *corev1.Pod, c *corev1.Container, objs Objects, base map[string]string) ([]string, map[string]string, error) {
	defined := map[string]string{}
	for _, src := range c.EnvFrom {
		data, err := envFromData(ctx, pod.Namespace, src, objs)
		if err != nil {
			return nil, nil, err
		}
		for k, v := range data {
			defined[src.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		var value string
		switch {
		case e.ValueFrom == nil:
			value = Expand(e.Value, MappingFor(defined, base))
		default:
			v, ok, err := valueFrom(ctx, pod, e.ValueFrom, objs)
			if err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if !ok { // an optional key that is absent: the variable is not set
				continue
			}
			value = v
		}
		defined[e.Name] = value
	}
	merged := map[string]string{}
	for k, v := range base {
		merged[k] = v
	}
	for k, v := range defined {
		merged[k] = v
	}
	out := make([]string, 0, len(merged))
	for k, v := range merged {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, merged, nil
}

// ExpandArgs expands `$(VAR)` in command and args against the resolved environment (undefined references
// stay as written, `$$` is a literal `$`).
func ExpandArgs(words []string, env map[string]string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Expand(w, MappingFor(env))
	}
	return out
}

func envFromData(ctx context.Context, ns string, src corev1.EnvFromSource, objs Objects) (map[string]string, error) {
	switch {
	case src.ConfigMapRef != nil:
		cm, err := objs.ConfigMap(ctx, ns, src.ConfigMapRef.Name)
		if err != nil {
			if isOptional(src.ConfigMapRef.Optional) {
				return nil, nil
			}
			return nil, configErr("envFrom configmap %q: %v", src.ConfigMapRef.Name, err)
		}
		return cm.Data, nil
	case src.SecretRef != nil:
		s, err := objs.Secret(ctx, ns, src.SecretRef.Name)
		if err != nil {
			if isOptional(src.SecretRef.Optional) {
				return nil, nil
			}
			return nil, configErr("envFrom secret %q: %v", src.SecretRef.Name, err)
		}
		data := map[string]string{}
		for k, v := range s.Data {
			data[k] = string(v)
		}
		for k, v := range s.StringData {
			data[k] = v
		}
		return data, nil
	}
	return nil, nil
}

func isOptional(p *bool) bool { return p != nil && *p }

// valueFrom resolves one env valueFrom; ok is false for an absent optional key.
func valueFrom(ctx context.Context, pod *corev1.Pod, vf *corev1.EnvVarSource, objs Objects) (string, bool, error) {
	switch {
	case vf.FieldRef != nil:
		v, err := FieldValue(pod, vf.FieldRef.FieldPath)
		return v, err == nil, err
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		s, err := objs.Secret(ctx, pod.Namespace, ref.Name)
		if err == nil {
			if v, ok := s.Data[ref.Key]; ok {
				return string(v), true, nil
			}
			if v, ok := s.StringData[ref.Key]; ok {
				return v, true, nil
			}
			err = fmt.Errorf("key %q not found", ref.Key)
		}
		if isOptional(ref.Optional) {
			return "", false, nil
		}
		return "", false, configErr("secret %q: %v", ref.Name, err)
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm, err := objs.ConfigMap(ctx, pod.Namespace, ref.Name)
		if err == nil {
			if v, ok := cm.Data[ref.Key]; ok {
				return v, true, nil
			}
			err = fmt.Errorf("key %q not found", ref.Key)
		}
		if isOptional(ref.Optional) {
			return "", false, nil
		}
		return "", false, configErr("configmap %q: %v", ref.Name, err)
	}
	return "", false, configErr("unsupported valueFrom (procnode resolves fieldRef, secretKeyRef, configMapKeyRef)")
}

// LocalIP is the pod and host IP a process-node pod sees: its processes share the host's loopback.
const LocalIP = "127.0.0.1"

// FieldValue is the downward API value of fieldPath for pod.
func FieldValue(pod *corev1.Pod, fieldPath string) (string, error) {
	if key, ok := subscript(fieldPath, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(fieldPath, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.hostIP", "status.podIPs", "status.hostIPs":
		return LocalIP, nil
	}
	return "", configErr("unsupported fieldRef %q", fieldPath)
}

// subscript parses `prefix['key']` (or "key") into key.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") || len(rest) < 3 {
		return "", false
	}
	inner := rest[:len(rest)-1]
	q := inner[0]
	if (q != '\'' && q != '"') || inner[len(inner)-1] != q {
		return "", false
	}
	return inner[1 : len(inner)-1], true
}

// MappingFor looks a name up in the maps in order; an undefined name stays `$(name)`, as in the kubelet.
func MappingFor(maps ...map[string]string) func(string) string {
	return func(name string) string {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v
			}
		}
		return "$(" + name + ")"
	}
}

// Expand replaces `$(VAR)` through mapping, `$$` by `$`, and keeps any other `$` as written (the kubelet's
// third_party/forked/golang/expansion rules).
func Expand(input string, mapping func(string) string) string {
	var buf strings.Builder
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] != '$' || cursor+1 >= len(input) {
			continue
		}
		buf.WriteString(input[checkpoint:cursor])
		read, isVar, advance := readVariable(input[cursor+1:])
		if isVar {
			buf.WriteString(mapping(read))
		} else {
			buf.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return buf.String() + input[checkpoint:]
}

func readVariable(input string) (string, bool, int) {
	switch input[0] {
	case '$':
		return "$", false, 1
	case '(':
		for i := 1; i < len(input); i++ {
			if input[i] == ')' {
				return input[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	default:
		return "$" + input[0:1], false, 1
	}
}
