# shellcheck shell=bash
# A stand-in for the Herald speaker's BGP side, for the demo and for tests while the speaker does not exist:
# a gobgpd in a node's namespace (AS $NODE_ASN) that peers with both routers and announces the prefixes it is
# given. Do not use it next to a real speaker on the same node (the routers would see two sessions from one
# address).

STANDIN_API_PORT=50052

standin_cli() { local i=$1; shift; in_ns "$(node_name "$i")" gobgp -u 127.0.0.1 -p "$STANDIN_API_PORT" "$@"; }

standin_up() {
	local i=$1 n d
	n=$(node_name "$i")
	d=$(node_dir "$i")
	if pid_alive "$n-standin-bgp"; then return 0; fi
	mkdir -p "$d"
	cat >"$d/standin-gobgpd.toml" <<EOT
[global.config]
  as = $NODE_ASN
  router-id = "$(node_ip4 "$i")"
  port = -1
[[neighbors]]
  [neighbors.config]
    neighbor-address = "$GOBGP4"
    peer-as = $GOBGP_ASN
  [neighbors.timers.config]
    connect-retry = 1
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
[[neighbors]]
  [neighbors.config]
    neighbor-address = "$FRR4"
    peer-as = $FRR_ASN
  [neighbors.timers.config]
    connect-retry = 1
  [[neighbors.afi-safis]]
    [neighbors.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
# Routes the routers send back carry AS $NODE_ASN in their path and are dropped by loop detection.
EOT
	start_daemon "$n-standin-bgp" nsenter --net="/var/run/netns/$n" -- \
		gobgpd -f "$d/standin-gobgpd.toml" -t toml -p --api-hosts "127.0.0.1:$STANDIN_API_PORT" --pprof-disable
	wait_for "stand-in BGP speaker on $n" 15 standin_cli "$i" global
}

standin_established() {
	local i=$1
	[ "$(standin_cli "$i" neighbor | awk '$4 == "Establ" || $5 == "Establ"' | wc -l)" -eq 2 ]
}

# cmd_announce NODE_INDEX[,NODE_INDEX...] PREFIX...: announce prefixes from the nodes (starts their stand-ins if
# needed) and wait until every stand-in has its two sessions up.
cmd_announce() {
	local nodes=${1:?usage: lab announce NODE_INDEX[,NODE_INDEX...] PREFIX...} i p
	shift
	lab_is_up || die "the lab is not up"
	for p in "$@"; do prefix_family "$p" >/dev/null; done
	for i in ${nodes//,/ }; do standin_up "$i"; done
	for i in ${nodes//,/ }; do
		for p in "$@"; do standin_cli "$i" global rib add "$p" -a ipv4 >/dev/null; done
	done
	for i in ${nodes//,/ }; do
		wait_for "stand-in BGP sessions on $(node_name "$i")" 30 standin_established "$i"
	done
}

# The stand-in speaks IPv4 unicast only.
prefix_family() { case $1 in *:*) die "the stand-in speaker announces IPv4 prefixes only: $1" ;; *) echo ipv4 ;; esac; }

# cmd_withdraw NODE_INDEX [PREFIX...]: withdraw prefixes; with none, stop the node's stand-in altogether.
cmd_withdraw() {
	local i=${1:?usage: lab withdraw NODE_INDEX [PREFIX...]} p
	shift
	if [ $# -eq 0 ]; then
		stop_daemon "$(node_name "$i")-standin-bgp" 5
		return 0
	fi
	for p in "$@"; do prefix_family "$p" >/dev/null; done
	for p in "$@"; do standin_cli "$i" global rib del "$p" -a ipv4 >/dev/null; done
}
