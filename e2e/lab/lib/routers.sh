# shellcheck shell=bash
# The routers on the lan: gobgpd (the user's "GoBGP peer") and FRR (zebra + bgpd, own dirs and sockets).
# Both peer passively with any lan address (dynamic neighbours), so speakers connect to them.

GOBGP_DIR() { echo "$LAB_STATE/$NS_GOBGP"; }
FRR_DIR() { echo "$LAB_STATE/$NS_FRR"; }

gobgp_cli() { in_ns "$NS_GOBGP" gobgp -u 127.0.0.1 -p "$GOBGP_API_PORT" "$@"; }
frr_cli() { in_ns "$NS_FRR" vtysh --vty_socket "$(FRR_DIR)/run" "$@"; }

routers_up() {
	local d
	d=$(GOBGP_DIR)
	mkdir -p "$d"
	cat >"$d/gobgpd.toml" <<EOT
[global.config]
  as = $GOBGP_ASN
  router-id = "$GOBGP4"
  local-address-list = ["$GOBGP4", "$GOBGP6"]
[global.use-multiple-paths.config]
  enabled = true

[[peer-groups]]
  [peer-groups.config]
    peer-group-name = "nodes"
    peer-as = $NODE_ASN
  [peer-groups.transport.config]
    passive-mode = true
  [peer-groups.timers.config]
    hold-time = 9
    keepalive-interval = 3
  [[peer-groups.afi-safis]]
    [peer-groups.afi-safis.config]
      afi-safi-name = "ipv4-unicast"
    [peer-groups.afi-safis.use-multiple-paths.config]
      enabled = true
  [[peer-groups.afi-safis]]
    [peer-groups.afi-safis.config]
      afi-safi-name = "ipv6-unicast"
    [peer-groups.afi-safis.use-multiple-paths.config]
      enabled = true

[[dynamic-neighbors]]
  [dynamic-neighbors.config]
    prefix = "$LAN4_NET"
    peer-group = "nodes"
[[dynamic-neighbors]]
  [dynamic-neighbors.config]
    prefix = "$LAN6_NET"
    peer-group = "nodes"
EOT
	start_daemon gobgpd nsenter --net="/var/run/netns/$NS_GOBGP" -- \
		gobgpd -f "$d/gobgpd.toml" -t toml -p --api-hosts "127.0.0.1:$GOBGP_API_PORT" --pprof-disable

	d=$(FRR_DIR)
	mkdir -p "$d/run"
	cat >"$d/frr.conf" <<EOT
frr defaults traditional
hostname $NS_FRR
log stdout informational
!
router bgp $FRR_ASN
 bgp router-id $FRR4
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 bgp bestpath as-path multipath-relax
 neighbor nodes peer-group
 neighbor nodes remote-as external
 neighbor nodes timers 3 9
 bgp listen range $LAN4_NET peer-group nodes
 bgp listen range $LAN6_NET peer-group nodes
 !
 address-family ipv4 unicast
  neighbor nodes activate
  maximum-paths 8
 exit-address-family
 !
 address-family ipv6 unicast
  neighbor nodes activate
  maximum-paths 8
 exit-address-family
!
EOT
	cat >"$d/vtysh.conf" <<EOT
service integrated-vtysh-config
EOT
	chown -R frr:frr "$d"
	local common=(-u frr -g frr -f "$d/frr.conf" --vty_socket "$d/run" -A 127.0.0.1 -P 0 --log stdout)
	start_daemon frr-zebra nsenter --net="/var/run/netns/$NS_FRR" -- \
		/usr/lib/frr/zebra "${common[@]}" -i "$d/run/zebra.pid" -z "$d/run/zserv.api"
	wait_for "FRR zebra socket" 10 test -S "$d/run/zserv.api" || return 1
	start_daemon frr-bgpd nsenter --net="/var/run/netns/$NS_FRR" -- \
		/usr/lib/frr/bgpd "${common[@]}" -i "$d/run/bgpd.pid" -z "$d/run/zserv.api" -p 179
	# bfdd runs from the start; BFD is off for the nodes until a test turns it on (Router.EnableBFD).
	start_daemon frr-bfdd nsenter --net="/var/run/netns/$NS_FRR" -- \
		/usr/lib/frr/bfdd "${common[@]}" -i "$d/run/bfdd.pid" -z "$d/run/zserv.api" --bfdctl "$d/run/bfdd.sock"
	wait_for "gobgpd API" 15 gobgp_cli global || return 1
	wait_for "FRR bgpd" 15 frr_cli -c 'show bgp summary json' || return 1
	wait_for "FRR bfdd" 15 frr_cli -c 'show bfd peers json' || return 1
}

routers_down() {
	stop_daemons 5 frr-bfdd frr-bgpd frr-zebra gobgpd
}
