# shellcheck shell=bash
# Lab topology: a bridge inside the lan namespace; every other namespace (nodes, client, routers) and the host
# get a veth into it. No default route anywhere; the host blocks the lab's address ranges it does not route.

# Routes the lab adds in the host (root) namespace besides the connected lan prefix. Removed by exact spec.
host_unreachable_routes() { echo "$LB_BGP_RANGE $SERVICE_CIDR $CLUSTER_CIDR"; }
# The IPv6 service and cluster ranges are blocked in IPv4-only labs too (nothing routes them there either).
host_unreachable_routes6() { echo "$LB_BGP_RANGE6 $SERVICE_CIDR6 $CLUSTER_CIDR6"; }

ns_sysctls() {
	local ns=$1 fwd=$2
	in_ns "$ns" sysctl -qw net.ipv4.ip_forward="$fwd" net.ipv6.conf.all.forwarding="$fwd" \
		net.ipv4.conf.all.rp_filter=0 net.ipv4.conf.default.rp_filter=0 \
		net.ipv6.conf.all.keep_addr_on_down=1 net.ipv6.conf.default.keep_addr_on_down=1 \
		net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0 \
		net.ipv6.conf.all.accept_ra=0 net.ipv6.conf.default.accept_ra=0 >/dev/null
}

# attach NS IP4 IP6 PORT: a veth "eth0" in NS whose peer PORT is a port of the lan bridge.
attach() {
	local ns=$1 ip4=$2 ip6=$3 port=$4
	ip netns add "$ns"
	ip -n "$ns" link set lo up
	ns_sysctls "$ns" 0
	ip -n "$ns" link add eth0 type veth peer name "$port" netns "$NS_LAN"
	ip -n "$NS_LAN" link set "$port" master br0 up
	ip -n "$ns" addr add "$ip4/24" dev eth0
	ip -n "$ns" addr add "$ip6/64" dev eth0 nodad
	ip -n "$ns" link set eth0 up
}

net_up() {
	local i n
	ip netns add "$NS_LAN"
	ip -n "$NS_LAN" link set lo up
	ns_sysctls "$NS_LAN" 0
	# Bridge netfilter calls off: the lan is a plain switch.
	in_ns "$NS_LAN" sysctl -qw net.bridge.bridge-nf-call-iptables=0 net.bridge.bridge-nf-call-ip6tables=0 \
		net.bridge.bridge-nf-call-arptables=0 2>/dev/null || true
	ip -n "$NS_LAN" link add br0 type bridge
	ip -n "$NS_LAN" link set br0 up

	# Host side: the apiserver address. Only the lab prefixes are routed into the lab.
	ip link add "$HOST_IF" type veth peer name host netns "$NS_LAN"
	ip -n "$NS_LAN" link set host master br0 up
	sysctl -qw "net.ipv6.conf.$HOST_IF.keep_addr_on_down=1" "net.ipv6.conf.$HOST_IF.accept_dad=0" \
		"net.ipv6.conf.$HOST_IF.accept_ra=0" >/dev/null
	ip addr add "$HOST4/24" dev "$HOST_IF"
	ip addr add "$HOST6/64" dev "$HOST_IF" nodad
	ip link set "$HOST_IF" up
	for n in $(host_unreachable_routes); do ip route add unreachable "$n" metric 4242; done
	for n in $(host_unreachable_routes6); do ip -6 route add unreachable "$n" metric 4242; done

	for ((i = 1; i <= LAB_NODES; i++)); do
		n=$(node_name "$i")
		attach "$n" "$(node_ip4 "$i")" "$(node_ip6 "$i")" "$n"
		ns_sysctls "$n" 1
		ip route add "$(node_pod_cidr "$i")" via "$(node_ip4 "$i")" dev "$HOST_IF"
		if lab_ipv6; then ip -6 route add "$(node_pod_cidr6 "$i")" via "$(node_ip6 "$i")" dev "$HOST_IF"; fi
	done
	# Nodes: other nodes' pod CIDRs via their lan address; service IPs towards the host (kube-proxy DNATs
	# them first; the host answers "unreachable" for the rest).
	local j
	for ((i = 1; i <= LAB_NODES; i++)); do
		n=$(node_name "$i")
		for ((j = 1; j <= LAB_NODES; j++)); do
			[ "$i" != "$j" ] || continue
			ip -n "$n" route add "$(node_pod_cidr "$j")" via "$(node_ip4 "$j")"
			if lab_ipv6; then ip -n "$n" -6 route add "$(node_pod_cidr6 "$j")" via "$(node_ip6 "$j")"; fi
		done
		ip -n "$n" route add "$SERVICE_CIDR" via "$HOST4"
		if lab_ipv6; then ip -n "$n" -6 route add "$SERVICE_CIDR6" via "$HOST6"; fi
	done

	attach "$NS_CLIENT" "$CLIENT4" "$CLIENT6" client
	attach "$NS_GOBGP" "$GOBGP4" "$GOBGP6" gobgp
	ns_sysctls "$NS_GOBGP" 1
	attach "$NS_FRR" "$FRR4" "$FRR6" frr
	ns_sysctls "$NS_FRR" 1
	# The external client hangs off FRR; nodes route its subnet back through FRR.
	ip netns add "$NS_EXT"
	ip -n "$NS_EXT" link set lo up
	ns_sysctls "$NS_EXT" 0
	ip -n "$NS_FRR" link add ext0 type veth peer name eth0 netns "$NS_EXT"
	ip -n "$NS_FRR" addr add "$EXT_GW4/24" dev ext0
	ip -n "$NS_FRR" addr add "$EXT_GW6/64" dev ext0 nodad
	ip -n "$NS_FRR" link set ext0 up
	ip -n "$NS_EXT" addr add "$EXT4/24" dev eth0
	ip -n "$NS_EXT" addr add "$EXT6/64" dev eth0 nodad
	ip -n "$NS_EXT" link set eth0 up
	ip -n "$NS_EXT" route add "$LB_BGP_RANGE" via "$EXT_GW4"
	ip -n "$NS_EXT" -6 route add "$LB_BGP_RANGE6" via "$EXT_GW6"
	for ((i = 1; i <= LAB_NODES; i++)); do
		ip -n "$(node_name "$i")" route add "$EXT_NET4" via "$FRR4"
		ip -n "$(node_name "$i")" -6 route add "$EXT_NET6" via "$FRR6"
	done
	# Multipath routes in the routers hash on L4 ports, so ECMP spreads connections.
	in_ns "$NS_GOBGP" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 >/dev/null
	in_ns "$NS_FRR" sysctl -qw net.ipv4.fib_multipath_hash_policy=1 >/dev/null
}

# lab_netns: every network namespace with the lab prefix.
lab_netns() { ip netns list 2>/dev/null | awk '{print $1}' | grep "^$P" || true; }

net_down() {
	local n
	for n in $(host_unreachable_routes); do ip route del unreachable "$n" metric 4242 2>/dev/null || true; done
	for n in $(host_unreachable_routes6); do ip -6 route del unreachable "$n" metric 4242 2>/dev/null || true; done
	ip link del "$HOST_IF" 2>/dev/null || true # its pod routes go with it
	for n in $(lab_netns); do ip netns del "$n" 2>/dev/null || log "  cannot delete netns $n"; done
}
