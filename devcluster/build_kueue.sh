#!/usr/bin/env bash
# Another Kueue release beside the pinned bed: build.sh's binaries with this Kueue in their place.
#
#   build_kueue.sh <bin dir from build.sh> <kueue version, e.g. v0.15.2>
#
# Kueue is built in a module of its own (its go.mod's Kubernetes libraries, not the bed's), as upstream
# builds it; the output is an overlay directory $cache/bin/<key>-kueue-<version>/ whose other binaries are
# links to build.sh's, and $cache/src/<same>/ with that release's manifests (cluster.source_dir finds them).
# Used by the oldest-Kueue lane (make test-oldest-kueue, docs/compatibility.md).
set -euo pipefail
base="$1"
version="$2"
case "$version" in v0.*) ;; *) echo "build_kueue.sh: version $version: expected v0.N.M" >&2; exit 2 ;; esac
cache="$(dirname "$(dirname "$base")")"
overlay="$cache/bin/$(basename "$base")-kueue-$version"
src="$cache/src/$(basename "$overlay")"
if [ -x "$overlay/kueue" ] && [ -d "$src/kueue" ]; then echo "$overlay"; exit 0; fi

export GOFLAGS="-mod=mod" CGO_ENABLED=0
work="$cache/work/kueue-$version"
mkdir -p "$work" "$overlay" "$src"
echo "[build $(date +%T)] kueue $version (own module)" >&2
cat > "$work/go.mod" <<GOMOD
module devcluster/kueue
go 1.26
require sigs.k8s.io/kueue $version
tool sigs.k8s.io/kueue/cmd/kueue
GOMOD
(cd "$work" && go mod tidy >&2)
ldflags="-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version"
(cd "$work" && go build -trimpath -ldflags "$ldflags" -o "$overlay/kueue.tmp" sigs.k8s.io/kueue/cmd/kueue >&2)
for f in "$base"/*; do
  [ "$(basename "$f")" = kueue ] || ln -sfn "$f" "$overlay/$(basename "$f")"
done
dir="$(cd "$work" && go mod download -json "sigs.k8s.io/kueue@$version" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
rm -rf "$src/kueue"; cp -r "$dir" "$src/kueue"; chmod -R u+w "$src/kueue"
base_src="$cache/src/$(basename "$base")"
for m in kwok jobset; do ln -sfn "$base_src/$m" "$src/$m"; done
mv "$overlay/kueue.tmp" "$overlay/kueue"
echo "[build $(date +%T)] done: $overlay" >&2
echo "$overlay"
