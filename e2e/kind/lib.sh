# shellcheck shell=bash disable=SC2034 # settings used by kind.sh
# Settings and helpers of the kind path (e2e/kind/kind.sh). Builds on the lab's common.sh (log, phase, daemons
# recorded by identity) and images.sh (single-binary image tarballs), but keeps its own state directory and
# names: nothing here touches the lab's.

KIND_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../lab/lib/common.sh
source "$KIND_DIR/../lab/lib/common.sh"
# shellcheck source=../lab/lib/images.sh
source "$KIND_DIR/../lab/lib/images.sh"

KIND_VERSION=${KIND_VERSION:-v0.33.0}
GOBGP_VERSION=${GOBGP_VERSION:-v3.37.0}
DEBIAN_SUITE=bookworm
DEBIAN_MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

# Everything the kind path makes is named with this prefix: cluster, docker network, containers, images.
KP=${HERALD_KIND_PREFIX:-herald-kind}
KIND_CLUSTER=$KP
KIND_NET=$KP
KIND_ROUTER=$KP-gobgp
KIND_CLIENT=$KP-client
# The published node image (a machine that reaches registry.k8s.io / docker.io uses it) and ours, built offline.
KIND_PUBLISHED_IMAGE=${KIND_PUBLISHED_IMAGE:-kindest/node:$K8S_VERSION}

KIND_STATE=${HERALD_KIND_STATE:-/run/herald-kind}
PIDS=$KIND_STATE/pids
LOGS=$KIND_STATE/logs

KIND_BIN=$HERALD_CACHE/kind-$KIND_VERSION/bin
GOBGP_BIN=$HERALD_CACHE/gobgp-$GOBGP_VERSION/bin
KIND_TOOLS=$HERALD_CACHE/kind-tools/bin

# Debian packages of the node's base (and of the router and client images, which are built FROM it).
BASE_PACKAGES=(systemd systemd-sysv dbus conntrack iptables nftables iproute2 ethtool util-linux mount kmod
	libseccomp2 pigz e2fsprogs bash ca-certificates jq procps containerd runc containernetworking-plugins
	arping ndisc6 curl socat iputils-ping tcpdump)
# The base rootfs is cached per suite and package list.
base_key() { printf '%s\n' "$DEBIAN_SUITE" "${BASE_PACKAGES[@]}" | sha256sum | cut -c1-12; }
BASE_DIR=$HERALD_CACHE/kind-base-$DEBIAN_SUITE-$(base_key)
BASE_TAR=$BASE_DIR/rootfs.tar

kindctl() { "$KIND_BIN/kind" "$@"; }
kubectl_kind() { "$K8S_BIN/kubectl" --kubeconfig "$KIND_STATE/kubeconfig" "$@"; }

# ---- Docker ----

# cap_missing: the host's capability bounding set lacks one that Docker gives privileged containers (here:
# CAP_SYS_RESOURCE, bit 24 of CapBnd).
cap_missing() {
	local bnd
	bnd=$(awk '/^CapBnd:/{print $2}' /proc/self/status)
	[ $((0x$bnd & (1 << 24))) = 0 ]
}

# docker_up: make sure a Docker daemon answers. One that runs is used as it is; otherwise Debian's docker.io is
# installed if needed and dockerd started in the background (recorded, so `kind.sh docker-down` stops only the
# daemon started here), with runcwrap as its default runtime when the host lacks a capability.
docker_up() {
	if docker info >/dev/null 2>&1; then
		log "docker: a daemon is running ($(docker version -f '{{.Server.Version}}' 2>/dev/null))"
		return 0
	fi
	command -v dockerd >/dev/null || phase "install docker.io (Debian)" install_docker
	local args=()
	if cap_missing; then
		mkdir -p "$KIND_TOOLS"
		(cd "$REPO_DIR" && CGO_ENABLED=0 go build -trimpath -o "$KIND_TOOLS/runcwrap" ./e2e/kind/runcwrap)
		log "docker: the bounding set lacks CAP_SYS_RESOURCE: runcwrap (drops what the host lacks) is the default runtime"
		args+=(--add-runtime "herald-runc=$KIND_TOOLS/runcwrap" --default-runtime herald-runc)
	fi
	mkdir -p "$KIND_STATE"
	start_daemon dockerd dockerd "${args[@]}"
	wait_for "dockerd to answer (log: $LOGS/dockerd.log)" 60 docker info
	log "docker: dockerd $(docker version -f '{{.Server.Version}}') started (log: $LOGS/dockerd.log)"
}

install_docker() { apt_install docker.io; }

# apt_install PACKAGE...: install Debian packages (root).
apt_install() {
	[ "$(id -u)" = 0 ] || die "installing $* needs root"
	log "apt: installing $*"
	DEBIAN_FRONTEND=noninteractive apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# docker_down: stop dockerd if this script started it (images and caches stay).
docker_down() {
	if pid_alive dockerd; then
		stop_daemon dockerd 30
		log "docker: dockerd (started by kind.sh) stopped"
	fi
}

# ---- The node image, built offline (kind.sh image) ----

# Images built here, and where their tarballs are cached. The kind path keeps its own image tarballs (pause,
# echo, herald) beside the lab's, never in them.
IMAGE_CACHE=$HERALD_CACHE/kind-images
NODE_CACHE=$HERALD_CACHE/kind-node-$K8S_VERSION
ETCD_IMAGE_TAG=${ETCD_VERSION#v}-0
# node_key: what the node image is made of (base packages, the node's files, the versions), short.
node_key() {
	{
		base_key
		echo "$K8S_VERSION $ETCD_VERSION"
		cat "$KIND_DIR"/node/*
	} | sha256sum | cut -c1-12
}
NODE_KEY=$(node_key)
NODE_IMAGE=localhost/$KP-node:$K8S_VERSION-$NODE_KEY
NODE_TAR=$NODE_CACHE/node-$NODE_KEY.tar
BASE_IMAGE=localhost/$KP-base:$(base_key)-$NODE_KEY
ROOTFS_IMAGE=localhost/$KP-rootfs:$(base_key)
ROUTER_IMAGE=localhost/$KP-gobgp:$GOBGP_VERSION-$NODE_KEY
CLIENT_IMAGE=localhost/$KP-client:$NODE_KEY

have_image() { docker image inspect "$1" >/dev/null 2>&1; }

# build_rootfs: debootstrap the Debian base (minbase + BASE_PACKAGES) into a cached tarball.
build_rootfs() {
	if [ -f "$BASE_TAR" ]; then
		log "base: cached $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1))"
		return 0
	fi
	command -v debootstrap >/dev/null || apt_install debootstrap
	local r
	r=$(mktemp -d "/tmp/$KP-rootfs.XXXXXX")
	log "base: debootstrap $DEBIAN_SUITE (minbase + ${#BASE_PACKAGES[@]} packages; cold: 4-8 min)"
	debootstrap --variant=minbase --include="$(
		IFS=,
		echo "${BASE_PACKAGES[*]}"
	)" "$DEBIAN_SUITE" "$r" "$DEBIAN_MIRROR" >"$LOGS/debootstrap.log" 2>&1 ||
		die "debootstrap failed (log: $LOGS/debootstrap.log)"
	rm -rf "$r"/var/cache/apt/archives/*.deb "$r"/var/lib/apt/lists/*
	mkdir -p "$BASE_DIR"
	tar --numeric-owner -C "$r" -cf "$BASE_TAR.tmp" .
	mv -f "$BASE_TAR.tmp" "$BASE_TAR"
	rm -rf "$r"
}

# build_base_image: the rootfs imported into Docker, with the node's files (e2e/kind/node) on top.
build_base_image() {
	if have_image "$BASE_IMAGE"; then
		log "base image: $BASE_IMAGE present"
		return 0
	fi
	have_image "$ROOTFS_IMAGE" || docker import "$BASE_TAR" "$ROOTFS_IMAGE" >/dev/null
	docker build -q --build-arg "ROOTFS=$ROOTFS_IMAGE" -t "$BASE_IMAGE" "$KIND_DIR/node" >/dev/null
	log "base image: $BASE_IMAGE built"
}

# build_component_images: tarballs of the images kubeadm asks for, tagged exactly as it asks: the control plane
# and etcd as single static binaries, kube-proxy on the base (it needs iptables and nft), the pause image.
build_component_images() {
	local d=$NODE_CACHE/images b
	mkdir -p "$d"
	for b in kube-apiserver kube-controller-manager kube-scheduler; do
		[ -f "$d/$b.tar" ] || image_archive "$d/$b.tar" "registry.k8s.io/$b:$K8S_VERSION" "$K8S_BIN/$b" "/$b"
	done
	[ -f "$d/etcd.tar" ] || image_archive "$d/etcd.tar" "registry.k8s.io/etcd:$ETCD_IMAGE_TAG" "$ETCD_BIN/etcd" /etcd
	if [ ! -f "$d/pause.tar" ]; then
		mkdir -p "$IMAGE_CACHE/bin"
		(cd "$REPO_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$IMAGE_CACHE/bin/" ./e2e/lab/images/pause)
		image_archive "$d/pause.tar" "$PAUSE_IMAGE" "$IMAGE_CACHE/bin/pause" /pause
	fi
	if [ ! -f "$d/kube-proxy-$NODE_KEY.tar" ]; then
		local w
		w=$(mktemp -d)
		cp "$K8S_BIN/kube-proxy" "$w/"
		# shellcheck disable=SC2016 # ${BASE} is for docker build
		printf 'ARG BASE\nFROM ${BASE}\nCOPY kube-proxy /usr/local/bin/kube-proxy\nENTRYPOINT ["/usr/local/bin/kube-proxy"]\n' >"$w/Dockerfile"
		docker build -q --build-arg "BASE=$BASE_IMAGE" -t "registry.k8s.io/kube-proxy:$K8S_VERSION" "$w" >/dev/null
		rm -rf "$w"
		rm -f "$d"/kube-proxy-*.tar
		docker save -o "$d/kube-proxy-$NODE_KEY.tar" "registry.k8s.io/kube-proxy:$K8S_VERSION"
	fi
	log "images: $(cd "$d" && echo *.tar)"
}

# build_node_image: the base plus kubeadm, kubelet, kubectl and the component images in its containerd (imported
# without unpacking; containerd unpacks on first use), committed as NODE_IMAGE and saved to NODE_TAR.
build_node_image() {
	if have_image "$NODE_IMAGE"; then
		log "node image: $NODE_IMAGE present"
	elif [ -f "$NODE_TAR" ]; then
		log "node image: loading the cached $NODE_TAR"
		docker load -q -i "$NODE_TAR" >/dev/null
	else
		local c=$KP-build-node t
		docker rm -f "$c" >/dev/null 2>&1 || true
		docker run -d --name "$c" --entrypoint sleep "$BASE_IMAGE" infinity >/dev/null
		for b in kubeadm kubelet kubectl; do docker cp "$K8S_BIN/$b" "$c:/usr/bin/$b"; done
		echo "$K8S_VERSION" | docker exec -i "$c" sh -c 'cat >/kind/version'
		docker exec -d "$c" sh -c 'exec containerd >/tmp/containerd.log 2>&1'
		wait_for "containerd in the image build container" 30 docker exec "$c" ctr version
		for t in "$NODE_CACHE"/images/*.tar; do
			docker exec -i "$c" ctr -n k8s.io images import --no-unpack --all-platforms - <"$t" >/dev/null
		done
		docker exec "$c" ctr -n k8s.io images ls -q | grep -v '^sha256:' | sed 's/^/node image: holds /' >&2
		docker exec "$c" sh -c 'kill $(pidof containerd); while pidof containerd >/dev/null; do sleep 0.1; done; rm -f /tmp/containerd.log'
		docker stop -t 1 "$c" >/dev/null
		# The stop signal and environment stay the base's (the container was run with them).
		docker commit -c 'ENTRYPOINT ["/usr/local/bin/herald-kind-entrypoint", "/sbin/init"]' -c 'CMD []' \
			"$c" "$NODE_IMAGE" >/dev/null
		docker rm -f "$c" >/dev/null
		mkdir -p "$NODE_CACHE"
		rm -f "$NODE_CACHE"/node-*.tar
		docker save -o "$NODE_TAR.tmp" "$NODE_IMAGE"
		mv -f "$NODE_TAR.tmp" "$NODE_TAR"
		log "node image: $NODE_IMAGE built and saved to $NODE_TAR ($(du -h "$NODE_TAR" | cut -f1))"
	fi
}
