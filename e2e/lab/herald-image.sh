#!/usr/bin/env bash
# Builds Herald's container image without Docker or a registry: the static `herald` binary (version and commit
# stamped as `make build` does) as /herald, and herald-ccm (`herald ccm` runs it) as /herald-ccm, in a single-layer docker-archive tarball, the way the lab builds its
# images (lib/images.sh image_archive). One image serves every role (controller, speaker, svclb, nllb).
#
# Usage: herald-image.sh [OUT] [TAG]
#   OUT  the tarball (default $HERALD_CACHE/images/herald.tar)
#   TAG  the image reference inside it (default $HERALD_IMAGE, localhost/herald:dev)
#
# Load it where the nodes run their pods, e.g. `ctr -n k8s.io images import OUT` on each containerd node,
# `docker load -i OUT`, `kind load image-archive OUT`, or `k3s ctr images import OUT`, then install the chart with
# --set image.repository=<TAG without :tag> --set image.tag=<tag> --set image.pullPolicy=Never.
set -euo pipefail
# shellcheck source=lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
# shellcheck source=lib/images.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/images.sh"
lab_strict

out=${1:-$HERALD_CACHE/images/herald.tar}
tag=${2:-$HERALD_IMAGE}
case $tag in
*:*) ;;
*) die "image reference $tag: want NAME:TAG" ;;
esac
mkdir -p "$(dirname "$out")"
bin=$HERALD_CACHE/images/bin
mkdir -p "$bin"
version=$(cd "$REPO_DIR" && git describe --tags --always --dirty 2>/dev/null || echo dev)
commit=$(cd "$REPO_DIR" && git rev-parse HEAD 2>/dev/null || echo unknown)
(cd "$REPO_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=$version -X main.commit=$commit" \
	-o "$bin/" ./cmd/herald ./cmd/herald-ccm) || die "building ./cmd/herald and ./cmd/herald-ccm failed"
image_archive "$out" "$tag" "$bin/herald,$bin/herald-ccm" /herald
log "image $tag ($version) written to $out"
