#!/usr/bin/env bash
# Build the process node (devcluster/procnode, a Go module of its own on virtual-kubelet) outside the repo.
#
# Output: $DEVCLUSTER_CACHE/bin/procnode-<key>/procnode, key = hash of the procnode sources (go.mod, go.sum,
# *.go) and this script: a procnode change rebuilds only procnode, never Kubernetes (build.sh's key).
# Prints the binary path last, like build.sh.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
src="$here/procnode"
cache="${DEVCLUSTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/airflow-kueue-devcluster}"
key="$(cd "$src" && cat go.mod go.sum $(ls ./*.go | grep -v '_test.go$' | sort) "$here/build_procnode.sh" | sha256sum | cut -c1-12)"
out="$cache/bin/procnode-$key/procnode"
if [ -x "$out" ]; then echo "$out"; exit 0; fi
echo "[build $(date +%T)] procnode $key" >&2
mkdir -p "$(dirname "$out")"
(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w" -o "$out.tmp" . >&2)
mv "$out.tmp" "$out"
echo "$out"
