# shellcheck shell=bash disable=SC2153 # KIND_NET, IMAGE_CACHE, ... come from lib.sh
# kind.sh's commands: image, up, down, e2e, cached.

# ---- Addresses (the kind network and the ranges reserved for Herald) ----
KIND_FAMILY=${KIND_FAMILY:-ipv4}
KIND_NET4=172.29.0.0/16
KIND_NET6=fd48:4b00::/64
KIND_NODES_RANGE4=172.29.0.0/24 # docker hands the nodes addresses from here
ROUTER4=172.29.1.2
ROUTER6=fd48:4b00::1:2
CLIENT4=172.29.1.3
CLIENT6=fd48:4b00::1:3
# A second network behind the router with the external client (reaches BGP addresses through the router only).
KIND_EXT_NET=$KP-ext
EXT_NET4=172.28.0.0/24
EXT_NET6=fd48:4b02::/64
ROUTER_EXT4=172.28.0.2
ROUTER_EXT6=fd48:4b02::2
EXT4=172.28.0.3
EXT6=fd48:4b02::3
KIND_EXT=$KP-ext
# Load-balancer ranges: L2 on the kind network, BGP off it (reached through the router).
KIND_LB_L2=172.29.2.64/27
KIND_LB_L2_6=fd48:4b00::2:0/112
KIND_LB_BGP=198.51.100.0/24
KIND_LB_BGP6=fd48:4b01::/64
KIND_POD4=10.246.0.0/16
KIND_POD6=fd48:4bf4::/56
KIND_SVC4=10.97.0.0/16
KIND_SVC6=fd48:4b96::/112
KIND_NODE_ASN=64500
KIND_ROUTER_ASN=64501
KIND_ECHO_IMAGE=$ECHO_IMAGE
KIND_HERALD_IMAGE=$HERALD_IMAGE
KIND_MEMBERLIST_PROFILE=${LAB_MEMBERLIST_PROFILE:-fast}

# ---- Timings: every step of image/up/e2e/down is recorded and summed up at the end ----
# One file per kind.sh run (two runs at once, e.g. `image` beside `e2e`, keep their own).
TIMINGS=$KIND_STATE/timings.$$
# step NAME CMD...: a phase whose duration goes into the summary.
step() {
	local name=$1 s
	shift
	s=$(date +%s.%N)
	phase "$name" "$@"
	printf '%s\t%s\n' "$(_elapsed "$s")" "$name" >>"$TIMINGS"
}
timings_reset() { mkdir -p "$KIND_STATE" && : >"$TIMINGS"; }
timings_print() {
	[ -s "$TIMINGS" ] || return 0
	log "timings (seconds):"
	awk -F'\t' '{printf "  %7.1f  %s\n", $1, $2; t += $1} END {printf "  %7.1f  total\n", t}' "$TIMINGS" >&2
	rm -f "$TIMINGS"
}

kindgen() { (cd "$REPO_DIR" && go run ./e2e/kind/cmd/kindgen "$@"); }

# ---- image ----

build_kind_cli() {
	if [ -x "$KIND_BIN/kind" ]; then
		log "kind: cached $KIND_BIN/kind ($("$KIND_BIN/kind" version))"
		return 0
	fi
	log "kind: go install sigs.k8s.io/kind@$KIND_VERSION"
	rm -rf "$KIND_BIN.tmp"
	GOBIN=$KIND_BIN.tmp CGO_ENABLED=0 go install "sigs.k8s.io/kind@$KIND_VERSION"
	mv "$KIND_BIN.tmp" "$KIND_BIN"
}

build_gobgp() {
	if have_all "$GOBGP_BIN" gobgpd gobgp; then
		log "gobgp: cached $GOBGP_BIN"
		return 0
	fi
	log "gobgp: go install github.com/osrg/gobgp/v3/cmd/{gobgpd,gobgp}@$GOBGP_VERSION"
	rm -rf "$GOBGP_BIN.tmp"
	GOBIN=$GOBGP_BIN.tmp CGO_ENABLED=0 go install "github.com/osrg/gobgp/v3/cmd/gobgpd@$GOBGP_VERSION" \
		"github.com/osrg/gobgp/v3/cmd/gobgp@$GOBGP_VERSION"
	mv "$GOBGP_BIN.tmp" "$GOBGP_BIN"
}

build_router_image() {
	if have_image "$ROUTER_IMAGE"; then
		log "router image: $ROUTER_IMAGE present"
		return 0
	fi
	local w
	w=$(mktemp -d)
	cp "$GOBGP_BIN/gobgpd" "$GOBGP_BIN/gobgp" "$KIND_DIR/router/run.sh" "$KIND_DIR/router/Dockerfile" "$w/"
	docker build -q --build-arg "BASE=$BASE_IMAGE" -t "$ROUTER_IMAGE" "$w" >/dev/null
	rm -rf "$w"
	log "router image: $ROUTER_IMAGE built"
}

# test_images: the echo backend and Herald's image as tarballs (Herald's is rebuilt every time: it is the code
# under test).
test_images() {
	mkdir -p "$IMAGE_CACHE/bin"
	(cd "$REPO_DIR" && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$IMAGE_CACHE/bin/" ./e2e/lab/images/echo)
	image_archive "$IMAGE_CACHE/echo.tar" "$KIND_ECHO_IMAGE" "$IMAGE_CACHE/bin/echo" /echo
	"$LAB_DIR/herald-image.sh" "$IMAGE_CACHE/herald.tar" "$KIND_HERALD_IMAGE"
}

offline_image() { [ "${KIND_NODE_IMAGE:-offline}" != published ]; }

cmd_image() {
	timings_reset
	step "docker" docker_up
	step "kind CLI $KIND_VERSION" build_kind_cli
	step "Kubernetes $K8S_VERSION binaries + kubeadm, etcd $ETCD_VERSION, helm $HELM_VERSION" \
		"$LAB_DIR/install.sh" k8s kubeadm etcd helm
	step "GoBGP $GOBGP_VERSION" build_gobgp
	step "Debian base (debootstrap)" build_rootfs
	step "base image" build_base_image
	if offline_image; then
		step "component images (control plane, etcd, kube-proxy, pause)" build_component_images
		step "node image" build_node_image
	else
		log "KIND_NODE_IMAGE=published: the node image is kind's $KIND_PUBLISHED_IMAGE (pulled by kind)"
	fi
	step "router image" build_router_image
	timings_print
}

# cmd_cached: everything `image` builds is in the cache (no build would run).
cmd_cached() {
	local missing=()
	[ -x "$KIND_BIN/kind" ] || missing+=("kind CLI ($KIND_BIN)")
	have_all "$K8S_BIN" "${K8S_BINARIES[@]}" "${K8S_EXTRA_BINARIES[@]}" || missing+=("Kubernetes binaries ($K8S_BIN)")
	[ -x "$ETCD_BIN/etcd" ] || missing+=("etcd ($ETCD_BIN)")
	[ -x "$HELM_BIN/helm" ] || missing+=("helm ($HELM_BIN)")
	have_all "$GOBGP_BIN" gobgpd gobgp || missing+=("gobgp ($GOBGP_BIN)")
	[ -f "$BASE_TAR" ] || missing+=("Debian base ($BASE_TAR)")
	[ -f "$NODE_TAR" ] || missing+=("node image ($NODE_TAR)")
	if [ ${#missing[@]} -gt 0 ]; then
		log "not cached: ${missing[*]}"
		return 1
	fi
	log "cached: everything the kind path needs is in $HERALD_CACHE"
}

# ---- up ----

node_names() { docker ps -a --filter "label=io.x-k8s.kind.cluster=$KIND_CLUSTER" --format '{{.Names}}' | sort; }
ctr_ip() { docker inspect -f "{{(index .NetworkSettings.Networks \"$2\").$3}}" "$1"; }
ctr_pid() { docker inspect -f '{{.State.Pid}}' "$1"; }

# make_networks: the kind network and the external one. Not --internal: Docker's rules for internal networks
# drop forwarded packets to addresses outside the network (the BGP range the router forwards to); the external
# client has no default route instead.
make_networks() {
	docker network inspect "$KIND_NET" >/dev/null 2>&1 ||
		docker network create --driver bridge --ipv6 --subnet "$KIND_NET4" --ip-range "$KIND_NODES_RANGE4" \
			--subnet "$KIND_NET6" -o com.docker.network.bridge.enable_ip_masquerade=true "$KIND_NET" >/dev/null
	docker network inspect "$KIND_EXT_NET" >/dev/null 2>&1 ||
		docker network create --driver bridge --ipv6 --subnet "$EXT_NET4" --subnet "$EXT_NET6" "$KIND_EXT_NET" >/dev/null
}

create_cluster() {
	local args=() cfg=$KIND_STATE/kind-config.yaml
	if offline_image; then
		have_image "$NODE_IMAGE" || build_node_image
		args=(-node-image "$NODE_IMAGE" -offline -etcd-tag "$ETCD_IMAGE_TAG")
	else
		args=(-node-image "$KIND_PUBLISHED_IMAGE")
	fi
	local pods=$KIND_POD4 svcs=$KIND_SVC4
	if [ "$KIND_FAMILY" = dual ]; then pods=$KIND_POD4,$KIND_POD6 svcs=$KIND_SVC4,$KIND_SVC6; fi
	kindgen cluster -name "$KIND_CLUSTER" -family "$KIND_FAMILY" -workers 2 "${args[@]}" \
		-pod-subnets "$pods" -service-subnets "$svcs" >"$cfg"
	KIND_EXPERIMENTAL_DOCKER_NETWORK=$KIND_NET kindctl create cluster --config "$cfg" \
		--kubeconfig "$KIND_STATE/kubeconfig" --retain >"$LOGS/kind-create.log" 2>&1 ||
		die "kind create cluster failed (log: $LOGS/kind-create.log; node logs: kind export logs --name $KIND_CLUSTER)"
}

# node_net: pod networking, the project's own (kind's kindnetd is not used): on every node a bridge CNI
# configuration for its pod CIDRs (host-local IPAM, portmap for hostPort) and routes to the other nodes' pod CIDRs
# through their addresses on the kind network; forwarding on. Idempotent: RestoreLink runs it again.
node_net() {
	local n m cidrs ranges c mine
	for n in $(node_names); do
		docker exec "$n" sysctl -qw net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1
		cidrs=$(kubectl_kind get node "$n" -o jsonpath='{.spec.podCIDRs[*]}')
		[ -n "$cidrs" ] || die "node $n has no pod CIDR"
		ranges=""
		for c in $cidrs; do ranges+="${ranges:+,}[{\"subnet\":\"$c\"}]"; done
		docker exec -i "$n" sh -c 'cat >/etc/cni/net.d/10-herald-kind.conflist' <<EOT
{"cniVersion": "0.4.0", "name": "herald-kind", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [$ranges], "routes": [{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
EOT
		for m in $(node_names); do
			[ "$m" != "$n" ] || continue
			for c in $(kubectl_kind get node "$m" -o jsonpath='{.spec.podCIDRs[*]}'); do
				case $c in
				*:*) docker exec "$n" ip -6 route replace "$c" via "$(ctr_ip "$m" "$KIND_NET" GlobalIPv6Address)" ;;
				*) docker exec "$n" ip route replace "$c" via "$(ctr_ip "$m" "$KIND_NET" IPAddress)" ;;
				esac
			done
		done
		# Replies to the external client go back through the router.
		docker exec "$n" ip route replace "$EXT_NET4" via "$ROUTER4"
		docker exec "$n" ip -6 route replace "$EXT_NET6" via "$ROUTER6" 2>/dev/null || true
		mine=$(ctr_ip "$n" "$KIND_NET" IPAddress)
		[ -n "$mine" ] || die "node $n has no address on $KIND_NET"
	done
	kubectl_kind wait --for=condition=Ready node --all --timeout=120s >/dev/null
	# Every node takes pods and load-balancer traffic, the control plane too, as in the lab (the suites' DaemonSets
	# and announcements want every node; kubeadm taints the control plane and labels it excluded).
	kubectl_kind taint nodes --all node-role.kubernetes.io/control-plane:NoSchedule- >/dev/null 2>&1 || true
	kubectl_kind label nodes --all node.kubernetes.io/exclude-from-external-load-balancers- >/dev/null 2>&1 || true
}

# load_images: the echo backend and Herald's image into every node's containerd (imported the same way on the
# published and the offline node image).
load_images() {
	local n t
	for n in $(node_names); do
		for t in "$IMAGE_CACHE/echo.tar" "$IMAGE_CACHE/herald.tar"; do
			docker exec -i "$n" ctr -n k8s.io images import --all-platforms - <"$t" >/dev/null
		done
	done
}

node_addrs() {
	local n
	for n in $(node_names); do
		ctr_ip "$n" "$KIND_NET" IPAddress
		ctr_ip "$n" "$KIND_NET" GlobalIPv6Address
	done | grep . | paste -sd, -
}

# start_router: the GoBGP router on the kind network (and the external one), peering with every node.
start_router() {
	mkdir -p "$KIND_STATE/gobgp"
	kindgen gobgp -name "$KIND_CLUSTER" -router-asn "$KIND_ROUTER_ASN" -node-asn "$KIND_NODE_ASN" \
		-router-id "$ROUTER4" -nodes "$(node_addrs)" >"$KIND_STATE/gobgp/gobgpd.toml"
	docker rm -f "$KIND_ROUTER" >/dev/null 2>&1 || true
	docker create --name "$KIND_ROUTER" --network "$KIND_NET" --ip "$ROUTER4" --ip6 "$ROUTER6" \
		--cap-add NET_ADMIN --sysctl net.ipv4.ip_forward=1 --sysctl net.ipv6.conf.all.forwarding=1 \
		--label "herald.dev/kind=$KP" -v "$KIND_STATE/gobgp:/etc/gobgp:ro" "$ROUTER_IMAGE" >/dev/null
	docker network connect --ip "$ROUTER_EXT4" --ip6 "$ROUTER_EXT6" "$KIND_EXT_NET" "$KIND_ROUTER"
	docker start "$KIND_ROUTER" >/dev/null
	# The router forwards only what it learned over BGP: no default route out of the setup.
	docker exec "$KIND_ROUTER" ip route del default 2>/dev/null || true
	docker exec "$KIND_ROUTER" ip -6 route del default 2>/dev/null || true
	wait_for "gobgpd in $KIND_ROUTER" 30 docker exec "$KIND_ROUTER" gobgp global
}

# start_clients: the client on the kind network and the external client behind the router. Neither has a default
# route: the client reaches the kind network directly and the BGP ranges through the router; the external
# client reaches the BGP ranges (only) through the router. Tests thus only ever send to what this setup made.
start_clients() {
	docker rm -f "$KIND_CLIENT" "$KIND_EXT" >/dev/null 2>&1 || true
	docker run -d --name "$KIND_CLIENT" --network "$KIND_NET" --ip "$CLIENT4" --ip6 "$CLIENT6" --cap-add NET_ADMIN \
		--label "herald.dev/kind=$KP" --entrypoint sleep "$BASE_IMAGE" infinity >/dev/null
	docker run -d --name "$KIND_EXT" --network "$KIND_EXT_NET" --ip "$EXT4" --ip6 "$EXT6" --cap-add NET_ADMIN \
		--label "herald.dev/kind=$KP" --entrypoint sleep "$BASE_IMAGE" infinity >/dev/null
	local c
	for c in "$KIND_CLIENT" "$KIND_EXT"; do
		docker exec "$c" ip route del default 2>/dev/null || true
		docker exec "$c" ip -6 route del default 2>/dev/null || true
	done
	docker exec "$KIND_CLIENT" ip route replace "$KIND_LB_BGP" via "$ROUTER4"
	docker exec "$KIND_CLIENT" ip -6 route replace "$KIND_LB_BGP6" via "$ROUTER6"
	docker exec "$KIND_EXT" ip route replace "$KIND_LB_BGP" via "$ROUTER_EXT4"
	docker exec "$KIND_EXT" ip -6 route replace "$KIND_LB_BGP6" via "$ROUTER_EXT6"
}

helm_kind() { "$HELM_BIN/helm" --kubeconfig "$KIND_STATE/kubeconfig" "$@"; }

# herald_install: helm install of charts/herald with the generated values, as a user installs it.
herald_install() {
	kindgen values -name "$KIND_CLUSTER" -herald-image "$KIND_HERALD_IMAGE" \
		-memberlist-profile "$KIND_MEMBERLIST_PROFILE" >"$KIND_STATE/herald-values.yaml"
	helm_kind upgrade --install herald "$REPO_DIR/charts/herald" --namespace herald-system --create-namespace \
		-f "$KIND_STATE/herald-values.yaml" --wait --timeout 180s >/dev/null
}

# write_env: the setup's facts for e2e/kind (kind.sh env). On an IPv4-only cluster no IPv6 address or range is
# listed (the containers have IPv6 on the Docker network, but the cluster does not use it), so the suites run
# their IPv4 parts only.
write_env() {
	local n i=0 f=$KIND_STATE/kind.env.tmp v6=""
	[ "$KIND_FAMILY" = dual ] && v6=1
	{
		echo "KIND_CLUSTER=$KIND_CLUSTER"
		echo "KIND_FAMILY=$KIND_FAMILY"
		echo "KUBECONFIG=$KIND_STATE/kubeconfig"
		echo "KIND_SCRIPT=$KIND_DIR/kind.sh"
		echo "HELM=$HELM_BIN/helm"
		echo "CHART=$REPO_DIR/charts/herald"
		echo "HERALD_VALUES=$KIND_STATE/herald-values.yaml"
		for n in $(node_names); do
			i=$((i + 1))
			# name ipv4 [ipv6] mac
			echo "NODE_$i=$n $(ctr_ip "$n" "$KIND_NET" IPAddress)${v6:+ $(ctr_ip "$n" "$KIND_NET" GlobalIPv6Address)} $(ctr_ip "$n" "$KIND_NET" MacAddress)"
		done
		echo "NODES=$i"
		echo "ROUTER=$KIND_ROUTER $ROUTER4${v6:+ $ROUTER6}"
		echo "NODE_ASN=$KIND_NODE_ASN"
		echo "ROUTER_ASN=$KIND_ROUTER_ASN"
		echo "CLIENT=$KIND_CLIENT $CLIENT4${v6:+ $CLIENT6}"
		echo "EXT=$KIND_EXT $EXT4${v6:+ $EXT6}"
		echo "NETWORK=$KIND_NET"
		echo "GATEWAY=$(ctr_ip "$KIND_CLIENT" "$KIND_NET" Gateway)"
		# Routes every node has besides the pod CIDRs (RestoreLink puts them back): to the external network.
		echo "NODE_ROUTES=$EXT_NET4 via $ROUTER4${v6:+;$EXT_NET6 via $ROUTER6}"
		echo "LB_L2_RANGE=$KIND_LB_L2"
		echo "LB_BGP_RANGE=$KIND_LB_BGP"
		if [ -n "$v6" ]; then
			echo "LB_L2_RANGE6=$KIND_LB_L2_6"
			echo "LB_BGP_RANGE6=$KIND_LB_BGP6"
		fi
		echo "ECHO_IMAGE=$KIND_ECHO_IMAGE"
		echo "HERALD_IMAGE=$KIND_HERALD_IMAGE"
	} >"$f"
	mv -f "$f" "$KIND_STATE/kind.env"
}

cmd_up() {
	case $KIND_FAMILY in ipv4 | dual) ;; *) die "KIND_FAMILY=$KIND_FAMILY: want ipv4 or dual" ;; esac
	[ "${KIND_TIMINGS_KEEP:-}" = 1 ] || timings_reset
	step "docker" docker_up
	if offline_image && ! have_image "$NODE_IMAGE" && [ ! -f "$NODE_TAR" ]; then
		die "no node image ($NODE_IMAGE): run 'make kind-image' (or KIND_NODE_IMAGE=published to pull kind's)"
	fi
	have_image "$ROUTER_IMAGE" || die "no router image ($ROUTER_IMAGE): run 'make kind-image'"
	step "Herald and echo images" test_images
	step "networks" make_networks
	step "kind create cluster ($KIND_FAMILY, 1 control plane + 2 workers)" create_cluster
	step "pod networking" node_net
	step "load images into the nodes" load_images
	step "GoBGP router" start_router
	step "clients" start_clients
	step "helm install charts/herald" herald_install
	write_env
	log "kind setup up: $(node_names | paste -sd' ' -), router $KIND_ROUTER, clients $KIND_CLIENT $KIND_EXT"
	log "kubectl: KUBECONFIG=$KIND_STATE/kubeconfig (or e2e/kind/kind.sh kubectl ...)"
}

cmd_down() {
	if docker info >/dev/null 2>&1; then
		if [ -x "$KIND_BIN/kind" ] && "$KIND_BIN/kind" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
			"$KIND_BIN/kind" delete cluster --name "$KIND_CLUSTER" >/dev/null 2>&1 || true
		fi
		local c
		for c in $(docker ps -aq --filter "label=herald.dev/kind=$KP") \
			$(docker ps -aq --filter "label=io.x-k8s.kind.cluster=$KIND_CLUSTER"); do
			docker rm -f "$c" >/dev/null 2>&1 || true
		done
		docker network rm "$KIND_NET" "$KIND_EXT_NET" >/dev/null 2>&1 || true
		local left
		left=$(
			docker ps -a --format '{{.Names}}' | grep "^$KP" || true
			docker network ls --format '{{.Name}}' | grep "^$KP" || true
		)
		[ -z "$left" ] || die "left behind: $left"
	fi
	rm -f "$KIND_STATE/kind.env" "$KIND_STATE/kubeconfig"
	log "kind setup down: no container or network named $KP* remains"
}

# cmd_e2e [go test args...]: up, the suites against the kind cluster, down (also on failure). KIND_KEEP=1 keeps it.
cmd_e2e() {
	local rc=0 s
	timings_reset
	export KIND_TIMINGS_KEEP=1
	trap 'cmd_down; timings_print' EXIT
	[ "${KIND_KEEP:-}" != 1 ] || trap 'timings_print; log "KIND_KEEP=1: the kind setup stays up (kind.sh down removes it)"' EXIT
	cmd_up
	s=$(date +%s.%N)
	local out=$LOGS/e2e-suites.log
	mkdir -p "$LOGS"
	log "==> e2e suites on kind (go test -tags e2e -v ./e2e/, HERALD_E2E_CLUSTER=kind; output in $out)"
	(cd "$REPO_DIR" && HERALD_E2E_CLUSTER=kind HERALD_KIND_ENV="$KIND_STATE/kind.env" \
		go test -tags e2e -count=1 -v -timeout "${E2E_TIMEOUT:-40m}" ${E2E_RUN:+-run "$E2E_RUN"} "$@" ./e2e/) >"$out" 2>&1 || rc=$?
	printf '%s\t%s\n' "$(_elapsed "$s")" "e2e suites (go test)" >>"$TIMINGS"
	# Every top-level test's verdict, a skipped one with its reason, and the failures' lines.
	awk '/^--- (PASS|FAIL)/ { print "    " $0 } /^--- SKIP/ { print "    " $0 (prev ~ /_test\.go:[0-9]+: / ? ":" prev : "") } { prev = $0 }' "$out"
	[ "$rc" = 0 ] || grep -E '^\s+[a-z_]+_test\.go:[0-9]+: ' "$out" | head -40 | sed 's/^/    /' || true
	log "<== e2e suites: $([ "$rc" = 0 ] && echo PASS || echo "FAIL ($rc)")"
	return "$rc"
}
