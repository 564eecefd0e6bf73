# shellcheck shell=bash
# lab demo: the echo backend behind a LoadBalancer Service, fetched from the client namespace.

DEMO_NS=herald-demo
DEMO_LB_IP=${DEMO_LB_IP:-10.251.0.10}

announce_all() { cmd_announce "$(seq -s, 1 "$LAB_NODES")" "$@"; }

demo_apply() { sed "s|ECHO_IMAGE|$ECHO_IMAGE|" "$LAB_DIR/manifests/echo.yaml" | kubectl_lab apply -f - >/dev/null; }

svc_address() { kubectl_lab -n "$DEMO_NS" get svc echo -o jsonpath='{.status.loadBalancer.ingress[0].ip}' 2>/dev/null; }
svc_has_address() { [ -n "$(svc_address)" ]; }

# herald_install: Herald the way a user installs it (helm install of charts/herald with the lab's values), then
# the demo's pools, advertisements and BGP peers. Any part that fails ends the demo, naming it and its logs.
herald_install() {
	local what="the controller"
	if [ "$LAB_SPEAKER" = 1 ]; then what="the controller and the speakers"; fi
	phase "helm install charts/herald ($what)" herald_up
	phase "apply the demo's pools" demo_manifest demo-pools.yaml
	phase "apply the demo's advertisements and BGP peers" demo_manifest demo-advertisements.yaml
}

demo_manifest() { kubectl_lab apply -f "$LAB_DIR/manifests/$1" >/dev/null; }

helm_lab() { "$HELM_BIN/helm" --kubeconfig "$LAB_STATE/admin.kubeconfig" "$@"; }

# herald_up: `lab herald-up`: helm upgrade --install of charts/herald with manifests/herald-values.yaml, the lab's
# image and LAB_MEMBERLIST_PROFILE; the speaker DaemonSet only with LAB_SPEAKER=1. Waits until every pod is ready.
# HERALD_HELM_ARGS adds helm arguments (e.g. --set for a suite's values).
herald_up() {
	check_memberlist_profile
	[ -x "$HELM_BIN/helm" ] || die "no helm in $HELM_BIN: run 'lab install' (or make kube-bin)"
	local speaker=false
	[ "$LAB_SPEAKER" = 1 ] && speaker=true
	# shellcheck disable=SC2086 # HERALD_HELM_ARGS is a list of arguments
	if ! helm_lab upgrade --install herald "$REPO_DIR/charts/herald" \
		--namespace herald-system --create-namespace -f "$LAB_DIR/manifests/herald-values.yaml" \
		--set "image.repository=${HERALD_IMAGE%:*}" --set "image.tag=${HERALD_IMAGE##*:}" \
		--set "memberlist.profile=$LAB_MEMBERLIST_PROFILE" --set "speaker.enabled=$speaker" \
		${HERALD_HELM_ARGS:-} --wait --timeout 120s >"$LOGS/helm-install.log" 2>&1; then
		herald_logs
		die "helm install of charts/herald failed (helm output: $LOGS/helm-install.log; pods and logs: $LOGS/herald-pods.log)"
	fi
}

# herald_logs: the Herald pods, their recent events and logs, into $LOGS/herald-pods.log (for a failed install).
herald_logs() {
	{
		kubectl_lab -n herald-system get pods -o wide
		kubectl_lab -n herald-system get events --sort-by=.lastTimestamp | tail -30
		kubectl_lab -n herald-system logs deploy/herald-controller --tail=50 --all-containers
		kubectl_lab -n herald-system logs ds/herald-speaker --tail=50 --all-containers
	} >"$LOGS/herald-pods.log" 2>&1 || true
}

# herald_down: `lab herald-down`: helm uninstall of the release, waiting for its pods to go (the CRDs and the
# configuration in them stay, by Helm's rules).
herald_down() {
	if helm_lab -n herald-system status herald >/dev/null 2>&1; then
		helm_lab -n herald-system uninstall herald --wait --timeout 120s >/dev/null
	fi
}

# check_memberlist_profile: LAB_MEMBERLIST_PROFILE is one the speaker knows (before anything is installed).
check_memberlist_profile() {
	case $LAB_MEMBERLIST_PROFILE in
	fast | default) ;;
	*) die "LAB_MEMBERLIST_PROFILE=$LAB_MEMBERLIST_PROFILE: want fast or default" ;;
	esac
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
	[ -f "$IMAGE_CACHE/herald.tar" ] || die "no Herald image in $IMAGE_CACHE: 'lab images' could not build ./cmd/herald (see its output)"
	herald_install
	phase "deploy the echo backend and a LoadBalancer Service" demo_apply
	phase "wait for the echo pods" kubectl_lab -n "$DEMO_NS" rollout status deploy/echo --timeout=120s >/dev/null
	on_failure "lab demo failed: the Herald controller assigned no address (kubectl -n herald-system logs deploy/herald-controller; kubectl -n $DEMO_NS describe svc echo); lab logs in $LOGS"
	phase "wait for the Herald controller to assign an address" wait_for "an address" 30 svc_has_address
	local ip node_ip out
	ip=$(svc_address)

	# The lan client does not speak BGP: a static route to node 1 takes it to the BGP address. The routers learn it
	# from the Herald speakers (the demo's BGPPeers and BGPAdvertisement).
	node_ip=$(node_ip4 1)
	ip -n "$NS_CLIENT" route replace "$ip/32" via "$node_ip"
	if [ "$LAB_SPEAKER" = 1 ]; then
		on_failure "lab demo failed: the Herald speakers did not announce both L2 addresses (kubectl -n herald-system logs ds/herald-speaker; kubectl -n herald-system get servicel2statuses); lab logs in $LOGS"
		phase "wait for the L2 service's two addresses" wait_for "two addresses" 30 l2_has_two
		on_failure "lab demo failed: the routers did not learn $ip/32 from every node (kubectl -n herald-system logs ds/herald-speaker; kubectl get events -A --field-selector reason=BGPSessionDown); lab logs in $LOGS"
		phase "wait for both routers to learn $ip/32 from every node (Herald speakers, BGP)" \
			wait_for "routes to $ip from every node" 60 routers_learned "$ip"
	fi
	on_failure "lab demo failed: kube-proxy does not serve $ip (kubectl -n $DEMO_NS get svc,endpointslices; the node logs in $LOGS)"
	phase "wait for kube-proxy to serve $ip" wait_for "an answer from $ip" 60 demo_fetch "$ip"
	on_failure ""

	echo
	echo "================ Herald lab demo ================"
	echo "Service herald-demo/echo (type LoadBalancer):"
	kubectl_lab -n "$DEMO_NS" get svc echo -o wide | sed 's/^/  /'
	echo "  address $ip: assigned by the Herald controller"
	echo
	echo "Herald address pools (herald-system):"
	kubectl_lab -n herald-system get ipaddresspools 2>&1 | sed 's/^/  /'
	echo
	echo "Backends:"
	kubectl_lab -n "$DEMO_NS" get pods -o wide | sed 's/^/  /'
	echo
	echo "BGP: routes to $ip at the routers, advertised by the Herald speakers$([ "$LAB_SPEAKER" = 1 ] || echo " (none: LAB_SPEAKER=0)"):"
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
	echo "  (a STATIC route to $(node_name 1): the lan client does not speak BGP; L2 addresses are answered by ARP/NDP below)"
	for _ in 1 2 3; do
		out=$(demo_fetch "$ip") || out="(no answer)"
		echo "  HTTP  $out"
	done
	out=$(printf "ping-1" | in_ns "$NS_CLIENT" socat -t 2 - "UDP:$ip:9090" 2>/dev/null) || out="(no answer)"
	echo "  UDP   $out"
	if [ "$LAB_SPEAKER" = 1 ]; then demo_l2; fi
	echo
	echo "Herald in this lab:"
	echo "  - installed by helm install of charts/herald (values: e2e/lab/manifests/herald-values.yaml, image $HERALD_IMAGE)"
	echo "      helm -n herald-system status herald; kubectl -n herald-system get pods,ipaddresspools,l2advertisements,bgpadvertisements,bgppeers"
	if [ "$LAB_SPEAKER" = 1 ]; then
		echo "  - speakers on every node answer ARP/NDP for the L2 pool and advertise the BGP pool to both routers"
	else
		echo "  - no speakers (LAB_SPEAKER=0): the controller assigns addresses; nothing announces them"
	fi
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
