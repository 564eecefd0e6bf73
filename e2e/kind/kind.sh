#!/usr/bin/env bash
# Herald on kind: a kind cluster (one control plane, two workers) with Herald installed by `helm install` of
# charts/herald, a GoBGP router container peering with every node and a client container on the kind network,
# and the e2e suites run against it (e2e.Cluster implemented by e2e/kind).
#
#   kind.sh image    build what a cluster needs offline, cached under $HERALD_CACHE: Docker (Debian docker.io,
#                    started in the background when no daemon runs), the kind CLI, kubeadm and the other Kubernetes
#                    binaries, a Debian base (debootstrap), the node image, the GoBGP router and client images
#   kind.sh up       create the cluster and everything around it (KIND_FAMILY=ipv4, the default, or dual)
#   kind.sh down     delete the cluster, the router and client containers and the network
#   kind.sh e2e      up, the e2e suites (go test -tags e2e ./e2e/ with HERALD_E2E_CLUSTER=kind), down; per-phase
#                    timings at the end. KIND_KEEP=1 leaves the cluster up; E2E_RUN selects tests (go test -run)
#   kind.sh env      the running setup's facts as KEY=VALUE lines (what e2e/kind reads)
#   kind.sh kubectl ...   kubectl against the cluster
#   kind.sh docker-down   stop dockerd if kind.sh started it (images and caches stay)
#   kind.sh cached   succeed when everything `image` builds is cached (CI runs the kind stage only then)
#
# KIND_NODE_IMAGE=published uses kind's published node image (kindest/node, from a registry) instead of building
# one; everything else stays the same. Everything is named with "herald-kind".
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/lib.sh"
# shellcheck source=cluster.sh
source "$KIND_DIR/cluster.sh"
lab_strict
mkdir -p "$KIND_STATE" "$LOGS"

cmd=${1:-help}
[ $# -eq 0 ] || shift
case $cmd in
image)
	on_failure "kind.sh image failed (logs in $LOGS)"
	cmd_image
	;;
up)
	on_failure "kind.sh up failed (logs in $LOGS); 'kind.sh down' removes what was made"
	cmd_up
	;;
down) cmd_down ;;
e2e) cmd_e2e "$@" ;;
env)
	[ -f "$KIND_STATE/kind.env" ] || die "the kind setup is not up"
	cat "$KIND_STATE/kind.env"
	;;
kubectl) kubectl_kind "$@" ;;
docker-down) docker_down ;;
cached) cmd_cached ;;
help | -h | --help) sed -n '2,/^set -e/p' "$0" | sed -e '/^set -e/d' -e 's/^# \{0,1\}//' ;;
*) die "unknown command $cmd (try: kind.sh help)" ;;
esac
