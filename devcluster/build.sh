#!/usr/bin/env bash
# Build the local cluster's binaries from upstream Go modules, cached outside the repo.
#
# Output: $DEVCLUSTER_CACHE/bin/<key>/{etcd,kube-apiserver,kube-controller-manager,kube-scheduler,kubectl,kueue,kwok,
# jobset-controller} and $DEVCLUSTER_CACHE/src/<key>/ (Kueue, KWOK and JobSet module trees, for CRDs, webhooks
# and stage manifests).
# The key is a hash of versions.env and this script, so a pin change rebuilds and nothing else does.
# Kubernetes, Kueue and KWOK share one wrapper module so that the Go build cache compiles each k8s.io
# package once; etcd has replace directives and a newer gRPC, so it gets a wrapper module of its own.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
source "$here/versions.env"
cache="${DEVCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airflow-kueue-devcluster}"
key="$(cat "$here/versions.env" "$here/build.sh" | sha256sum | cut -c1-12)"
bin="$cache/bin/$key"
tools=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kueue kwok jobset-controller)

have_all() { for t in "${tools[@]}"; do [ -x "$bin/$t" ] || return 1; done; }
if have_all; then echo "$bin"; exit 0; fi

export GOFLAGS="-mod=mod" CGO_ENABLED=0
work="$cache/work/$key"
mkdir -p "$bin" "$work/k8s" "$work/etcd"
log() { echo "[build $(date +%T)] $*" >&2; }

# --- etcd: a three-line main around etcdmain (the server module's replaces do not apply to dependents).
log "etcd $ETCD_VERSION"
cat > "$work/etcd/go.mod" <<GOMOD
module devcluster/etcd
go 1.26
require go.etcd.io/etcd/server/v3 $ETCD_VERSION
GOMOD
cat > "$work/etcd/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
(cd "$work/etcd" && go mod tidy >&2 && go build -trimpath -o "$bin/etcd" . >&2)

# --- Kubernetes + Kueue + KWOK + JobSet in one module.
k8s_minor="${KUBERNETES_VERSION#v1.}"             # 36.3
staging="v0.${k8s_minor}"                         # v0.36.3
log "kubernetes $KUBERNETES_VERSION (staging $staging), kueue $KUEUE_VERSION, kwok $KWOK_VERSION, jobset $JOBSET_VERSION"
go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" > "$work/k8s/kubernetes.json"
k8s_gomod="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["GoMod"])' "$work/k8s/kubernetes.json")"
{
  echo "module devcluster/k8s"
  echo "go 1.26"
  echo "require ("
  echo "	k8s.io/kubernetes $KUBERNETES_VERSION"
  echo "	sigs.k8s.io/kueue $KUEUE_VERSION"
  echo "	sigs.k8s.io/kwok $KWOK_VERSION"
  echo "	sigs.k8s.io/jobset $JOBSET_VERSION"
  echo ")"
  echo "replace ("
  # Every staging module k8s.io/X => ./staging/... becomes k8s.io/X v0.N.M.
  sed -n 's#^\t\(k8s.io/[^ ]*\) => ./staging/.*#\t\1 => \1 '"$staging"'#p' "$k8s_gomod"
  echo ")"
  echo "tool ("
  for p in kube-apiserver kube-controller-manager kube-scheduler kubectl; do echo "	k8s.io/kubernetes/cmd/$p"; done
  echo "	sigs.k8s.io/kueue/cmd/kueue"
  echo "	sigs.k8s.io/kwok/cmd/kwok"
  echo "	sigs.k8s.io/jobset"
  echo ")"
} > "$work/k8s/go.mod"
(cd "$work/k8s" && go mod tidy >&2)
ver_pkg=k8s.io/component-base/version
ldflags="-s -w -X $ver_pkg.gitVersion=$KUBERNETES_VERSION -X $ver_pkg.gitMajor=1 -X $ver_pkg.gitMinor=${k8s_minor%%.*}"
ldflags="$ldflags -X $ver_pkg.gitTreeState=clean -X $ver_pkg.buildDate=1970-01-01T00:00:00Z"
ldflags="$ldflags -X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION"
for p in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  log "$p"; (cd "$work/k8s" && go build -trimpath -ldflags "$ldflags" -o "$bin/$p" "k8s.io/kubernetes/cmd/$p" >&2)
done
log kueue; (cd "$work/k8s" && go build -trimpath -ldflags "$ldflags" -o "$bin/kueue" sigs.k8s.io/kueue/cmd/kueue >&2)
log kwok; (cd "$work/k8s" && go build -trimpath -ldflags "$ldflags" -o "$bin/kwok" sigs.k8s.io/kwok/cmd/kwok >&2)
log jobset; (cd "$work/k8s" && go build -trimpath -ldflags "$ldflags" -o "$bin/jobset-controller" sigs.k8s.io/jobset >&2)

# Manifests (CRDs, webhooks, KWOK stages) from the same module versions.
src="$cache/src/$key"
mkdir -p "$src"
for m in "sigs.k8s.io/kueue@$KUEUE_VERSION:kueue" "sigs.k8s.io/kwok@$KWOK_VERSION:kwok" \
  "sigs.k8s.io/jobset@$JOBSET_VERSION:jobset"; do
  dir="$(cd "$work/k8s" && go mod download -json "${m%%:*}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  rm -rf "${src:?}/${m##*:}"; cp -r "$dir" "$src/${m##*:}"; chmod -R u+w "$src/${m##*:}"
done
have_all
log "done: $bin"
echo "$bin"
