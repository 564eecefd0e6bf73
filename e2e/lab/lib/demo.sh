# shellcheck shell=bash
# lab demo: the echo backend behind a LoadBalancer Service, fetched from the client namespace.

DEMO_NS=herald-demo
DEMO_LB_IP=${DEMO_LB_IP:-10.251.0.10}

announce_all() { cmd_announce "$(seq -s, 1 "$LAB_NODES")" "$@"; }

demo_apply() { sed "s|ECHO_IMAGE|$ECHO_IMAGE|" "$LAB_DIR/manifests/echo.yaml" | kubectl_lab apply -f - >/dev/null; }

svc_address() { kubectl_lab -n "$DEMO_NS" get svc echo -o jsonpath='{.status.loadBalancer.ingress[0].ip}' 2>/dev/null; }
svc_has_address() { [ -n "$(svc_address)" ]; }

# herald_install: Herald the way a user installs it (helm install of charts/herald) once the chart exists,
# else a minimal manifest for the controller; then the demo's pools, advertisements and BGP peers. Sets
# HERALD_INSTALLED_BY to how Herald was installed, or to "" if it could not be (the demo then goes on without).
# It runs in the current shell (it sets a variable); the steps that may fail run with try_phase.
HERALD_INSTALLED_BY=""
herald_install() {
	HERALD_INSTALLED_BY=""
	if [ -d "$REPO_DIR/charts/herald" ] && [ -x "$HELM_BIN/helm" ]; then
		try_phase "helm install charts/herald" helm_install
		if [ "$PHASE_STATUS" = 0 ]; then
			HERALD_INSTALLED_BY="helm install of charts/herald"
		else
			log "helm install failed: falling back to the minimal controller manifest"
			"$HELM_BIN/helm" --kubeconfig "$LAB_STATE/admin.kubeconfig" -n herald-system uninstall herald >/dev/null 2>&1 || true
		fi
	fi
	if [ -z "$HERALD_INSTALLED_BY" ]; then
		try_phase "install the Herald controller (minimal manifest; no Helm chart yet)" herald_controller_up
		[ "$PHASE_STATUS" = 0 ] || return 0
		HERALD_INSTALLED_BY="minimal manifest e2e/lab/manifests/herald-controller.yaml (no Helm chart yet)"
	fi
	# The chart brings the speaker; the minimal manifest's is only for the controller-only path.
	if [ "$LAB_SPEAKER" = 1 ] && [ "$HERALD_INSTALLED_BY" != "helm install of charts/herald" ]; then
		try_phase "install the Herald speaker DaemonSet (LAB_SPEAKER=1; minimal manifest)" herald_speaker_up
		[ "$PHASE_STATUS" = 0 ] || log "the Herald speaker did not become ready (kubectl -n herald-system logs ds/herald-speaker)"
	fi
	try_phase "apply the demo's pools" demo_manifest demo-pools.yaml
	if [ "$PHASE_STATUS" != 0 ]; then
		HERALD_INSTALLED_BY=""
		return 0
	fi
	try_phase "apply the demo's advertisements and BGP peers" demo_manifest demo-advertisements.yaml
	[ "$PHASE_STATUS" = 0 ] || log "the demo's L2Advertisement/BGPAdvertisement/BGPPeers were refused (see above)"
}

demo_manifest() { kubectl_lab apply -f "$LAB_DIR/manifests/$1" >/dev/null; }

# HERALD_HELM_ARGS adds helm arguments (e.g. --set for values the chart names differently).
helm_install() {
	# shellcheck disable=SC2086 # HERALD_HELM_ARGS is a list of arguments
	"$HELM_BIN/helm" --kubeconfig "$LAB_STATE/admin.kubeconfig" upgrade --install herald "$REPO_DIR/charts/herald" \
		--namespace herald-system --create-namespace -f "$LAB_DIR/manifests/herald-values.yaml" \
		--set "image.repository=${HERALD_IMAGE%:*}" --set "image.tag=${HERALD_IMAGE##*:}" \
		--set "memberlist.profile=$LAB_MEMBERLIST_PROFILE" ${HERALD_HELM_ARGS:-} --wait --timeout 120s
}

# herald_up: the Herald controller, and the speaker with LAB_SPEAKER=1 (`lab herald-up`).
herald_up() {
	check_memberlist_profile
	herald_controller_up
	if [ "$LAB_SPEAKER" = 1 ]; then herald_speaker_up; fi
}

# herald_down: remove the controller Deployment and the speaker DaemonSet (CRDs and configuration stay).
herald_down() {
	kubectl_lab -n herald-system delete daemonset herald-speaker --ignore-not-found --wait=true >/dev/null
	kubectl_lab -n herald-system delete deployment herald-controller --ignore-not-found --wait=true >/dev/null
}

# check_memberlist_profile: LAB_MEMBERLIST_PROFILE is one the speaker knows (before anything is installed).
check_memberlist_profile() {
	case $LAB_MEMBERLIST_PROFILE in
	fast | default) ;;
	*) die "LAB_MEMBERLIST_PROFILE=$LAB_MEMBERLIST_PROFILE: want fast or default" ;;
	esac
}

# herald_speaker_up: the speaker DaemonSet (manifests/herald-speaker.yaml; the namespace comes with the
# controller's manifest), and wait until it runs on every node.
herald_speaker_up() {
	check_memberlist_profile
	sed -e "s|HERALD_IMAGE|$HERALD_IMAGE|" -e "s|MEMBERLIST_PROFILE|$LAB_MEMBERLIST_PROFILE|" \
		"$LAB_DIR/manifests/herald-speaker.yaml" | kubectl_lab apply -f - >/dev/null
	kubectl_lab -n herald-system rollout status ds/herald-speaker --timeout=60s >/dev/null
}

# speaker_ready: the Herald speaker DaemonSet runs, ready, on every node it is scheduled to.
speaker_ready() {
	local st
	st=$(kubectl_lab -n herald-system get ds herald-speaker -o jsonpath='{.status.desiredNumberScheduled} {.status.numberReady}' 2>/dev/null) || return 1
	[ "${st% *}" -gt 0 ] 2>/dev/null && [ "${st% *}" = "${st#* }" ]
}

herald_controller_up() {
	kubectl_lab apply -f "$REPO_DIR/config/crd" >/dev/null
	kubectl_lab wait --for condition=established --timeout=30s -f "$REPO_DIR/config/crd" >/dev/null
	sed "s|HERALD_IMAGE|$HERALD_IMAGE|" "$LAB_DIR/manifests/herald-controller.yaml" | kubectl_lab apply -f - >/dev/null
	kubectl_lab -n herald-system rollout status deploy/herald-controller --timeout=60s >/dev/null
}

demo_fetch() { in_ns "$NS_CLIENT" curl -s --max-time 2 "http://$1/"; }

# routers_learned IP: gobgpd has a path to IP/32 from every node and FRR installed it in its FIB with every node
# as a next hop.
routers_learned() {
	local i rib fib
	rib=$(gobgp_cli global rib "$1/32" 2>/dev/null) || return 1
	fib=$(in_ns "$NS_FRR" ip route show "$1" 2>/dev/null) || return 1
	for ((i = 1; i <= LAB_NODES; i++)); do
		grep -q "$(node_ip4 "$i") " <<<"$rib" || return 1
		grep -q "via $(node_ip4 "$i") " <<<"$fib" || { [ "$LAB_NODES" = 1 ] && grep -q "$(node_ip4 "$i")" <<<"$fib"; } || return 1
	done
}

# l2_addresses: the addresses of the demo's L2 Service, space-separated.
l2_addresses() { kubectl_lab -n "$DEMO_NS" get svc echo-l2 -o jsonpath='{.status.loadBalancer.ingress[*].ip}' 2>/dev/null; }
l2_has_two() { [ "$(l2_addresses | wc -w)" = 2 ]; }

# url_host ADDR: ADDR as the host part of a URL (IPv6 in brackets).
url_host() { case $1 in *:*) echo "[$1]" ;; *) echo "$1" ;; esac; }

# mac_node MAC: the lab node whose lan interface has MAC, or "(no node)".
mac_node() {
	local i m
	for ((i = 1; i <= LAB_NODES; i++)); do
		m=$(ip -n "$(node_name "$i")" -o link show eth0 | grep -o 'link/ether [0-9a-f:]*' | cut -d' ' -f2)
		if [ "$m" = "$1" ]; then
			node_name "$i"
			return 0
		fi
	done
	echo "(no node)"
}

# demo_l2: the L2 Service answered from the lan client by ARP/NDP, with the MAC the client's kernel resolved, the
# node it belongs to, and the node the speakers report in ServiceL2Status.
demo_l2() {
	local a out mac
	echo
	echo "L2: Service herald-demo/echo-l2 on lan addresses, announced by the Herald speaker (ARP for IPv4, NDP for IPv6):"
	for a in $(l2_addresses); do
		out=$(in_ns "$NS_CLIENT" curl -s --max-time 2 "http://$(url_host "$a")/") || out="(no answer)"
		mac=$(ip -n "$NS_CLIENT" neigh show "$a" | grep -o 'lladdr [0-9a-f:]*' | cut -d' ' -f2 || true)
		echo "  $NS_CLIENT -> $a: resolved by its kernel to ${mac:-(unresolved)} = $(mac_node "${mac:-none}")"
		echo "    HTTP  $out"
	done
	echo "  ServiceL2Status (which node the speakers elected, on which interfaces):"
	kubectl_lab -n herald-system get servicel2statuses \
		-o custom-columns='NAME:.metadata.name,NODE:.status.node,ADDRESSES:.status.addresses,INTERFACES:.status.interfaces' 2>&1 |
		sed 's/^/    /'
}

cmd_demo() {
	need_root
	LAB_SPEAKER=$LAB_SPEAKER_DEMO
	if ! lab_is_up; then cmd_up; fi
	local ip node_ip assigned_by
	local controller=0
	if [ ! -f "$IMAGE_CACHE/herald.tar" ]; then
		log "no Herald image: the lab assigns the address by hand"
	elif [ ! -d "$REPO_DIR/config/crd" ]; then
		log "no CRDs in config/crd: the lab assigns the address by hand"
	else
		herald_install
		if [ -n "$HERALD_INSTALLED_BY" ]; then
			controller=1
		else
			log "the Herald controller did not start (kubectl -n herald-system logs deploy/herald-controller); the lab assigns the address by hand"
		fi
	fi
	phase "deploy the echo backend and a LoadBalancer Service" demo_apply
	phase "wait for the echo pods" kubectl_lab -n "$DEMO_NS" rollout status deploy/echo --timeout=120s >/dev/null

	# The Herald controller assigns the address. Without one, the lab sets it by hand.
	if [ $controller = 1 ]; then
		try_phase "wait for the Herald controller to assign an address" wait_for "an address" 30 svc_has_address
	fi
	ip=$(svc_address)
	if [ -n "$ip" ]; then
		assigned_by="assigned by the Herald controller"
	else
		kubectl_lab -n "$DEMO_NS" patch svc echo --subresource=status --type=merge \
			-p "{\"status\":{\"loadBalancer\":{\"ingress\":[{\"ip\":\"$DEMO_LB_IP\",\"ipMode\":\"VIP\"}]}}}" >/dev/null
		ip=$DEMO_LB_IP
		assigned_by="set BY HAND by the lab (no Herald controller yet)"
	fi

	# The lan client does not speak BGP: a static route to node 1 takes it to the BGP address. The routers learn it
	# from the Herald speakers (the demo's BGPPeers and BGPAdvertisement); without speakers the lab stands in with a
	# gobgpd in every node announcing the address to both routers.
	node_ip=$(node_ip4 1)
	ip -n "$NS_CLIENT" route replace "$ip/32" via "$node_ip"
	local standin=0 speaker=0
	if [ $controller = 1 ] && speaker_ready; then
		speaker=1
		try_phase "wait for the L2 service's two addresses" wait_for "two addresses" 30 l2_has_two
		try_phase "wait for both routers to learn $ip/32 from every node (Herald speakers, BGP)" \
			wait_for "routes to $ip from every node" 60 routers_learned "$ip"
		[ "$PHASE_STATUS" = 0 ] || log "the speakers' BGP routes did not reach both routers (kubectl -n herald-system logs ds/herald-speaker; kubectl get events -A --field-selector reason=BGPSessionDown)"
	else
		standin=1
		phase "announce $ip/32 from every node (stand-in BGP speakers)" announce_all "$ip/32"
	fi

	local out
	phase "wait for kube-proxy to serve $ip" wait_for "an answer from $ip" 60 demo_fetch "$ip"

	echo
	echo "================ Herald lab demo ================"
	echo "Service herald-demo/echo (type LoadBalancer):"
	kubectl_lab -n "$DEMO_NS" get svc echo -o wide | sed 's/^/  /'
	echo "  address $ip: $assigned_by"
	if [ $controller = 1 ]; then
		echo
		echo "Herald address pools (herald-system):"
		kubectl_lab -n herald-system get ipaddresspools 2>&1 | sed 's/^/  /'
	fi
	echo
	echo "Backends:"
	kubectl_lab -n "$DEMO_NS" get pods -o wide | sed 's/^/  /'
	echo
	echo "BGP: routes to $ip at the routers, $([ $standin = 1 ] && echo "announced by the lab's STAND-IN speakers (gobgpd in each node namespace)" || echo "advertised by the Herald speakers"):"
	echo "  gobgpd ($NS_GOBGP, AS $GOBGP_ASN, $GOBGP4):"
	gobgp_cli global rib 2>&1 | sed 's/^/    /'
	echo "  FRR ($NS_FRR, AS $FRR_ASN, $FRR4), kernel FIB:"
	in_ns "$NS_FRR" ip route show "$ip" 2>&1 | sed 's/^/    /'
	echo
	echo "Client $NS_EXT ($EXT4, behind FRR) -> $ip (ECMP through FRR's BGP routes):"
	for _ in 1 2 3 4 5 6; do
		out=$(in_ns "$NS_EXT" curl -s --max-time 2 "http://$ip/") || out="(no answer)"
		echo "  HTTP  $out"
	done
	echo
	echo "Client $NS_CLIENT ($CLIENT4, on the lan) -> $ip:"
	echo "  route: $(ip -n "$NS_CLIENT" route get "$ip" | head -1)"
	echo "  (a STATIC route to $(node_name 1) set by the lab; a speaker would answer ARP for lan (L2) addresses)"
	for _ in 1 2 3; do
		out=$(demo_fetch "$ip") || out="(no answer)"
		echo "  HTTP  $out"
	done
	out=$(printf "ping-1" | in_ns "$NS_CLIENT" socat -t 2 - "UDP:$ip:9090" 2>/dev/null) || out="(no answer)"
	echo "  UDP   $out"
	if [ $speaker = 1 ]; then demo_l2; fi
	echo
	echo "Herald in this lab (and where the lab stands in):"
	if [ $controller = 1 ]; then
		echo "  - Herald: installed by $HERALD_INSTALLED_BY"
		echo "      kubectl -n herald-system get pods,ipaddresspools,l2advertisements,bgpadvertisements,bgppeers"
	else
		echo "  - Herald controller: would assign the address from an IPAddressPool and write the Service status"
	fi
	if [ $speaker = 1 ]; then
		echo "  - Herald speaker: runs on every node, answers ARP/NDP for the L2 pool and advertises the BGP pool to both"
		echo "    routers (BGPPeers gobgp and frr; kubectl -n herald-system get bgppeers,bgpadvertisements)"
	else
		echo "  - Herald speaker: not running (LAB_SPEAKER=0, or it did not become ready): the L2 section is skipped;"
		echo "    the lab's stand-ins announce the BGP pool ('lab announce I PREFIX' / 'lab withdraw I')"
	fi
	echo "  - Herald image: $([ -f "$IMAGE_CACHE/herald.tar" ] && echo "built and imported as $HERALD_IMAGE" || echo "not built (./cmd/herald does not build yet)")"
	echo
	echo "Explore:"
	echo "  export KUBECONFIG=$LAB_STATE/admin.kubeconfig PATH=$K8S_BIN:\$PATH"
	echo "  kubectl get nodes,pods -A -o wide"
	echo "  ip netns exec $NS_CLIENT curl http://$ip/"
	echo "  ip netns exec $NS_EXT curl http://$ip/"
	echo "  ip netns exec $NS_GOBGP gobgp -p $GOBGP_API_PORT neighbor"
	echo "  ip netns exec $NS_FRR vtysh --vty_socket $(FRR_DIR)/run -c 'show bgp summary'"
	echo "  $LAB_DIR/lab status"
	echo "Tear down:"
	echo "  $LAB_DIR/lab down"
}
