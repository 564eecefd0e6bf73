#!/bin/bash
# The GoBGP router container of Herald's kind setup: gobgpd with the configuration kind.sh generated
# (/etc/gobgp/gobgpd.toml), and its RIB copied into the container's kernel routing table every half second
# (gobgpd installs no routes itself), so traffic to the addresses the nodes advertise is forwarded through this
# router, spread over every node that advertises them (ECMP).
set -euo pipefail

gobgpd -f /etc/gobgp/gobgpd.toml -t toml --pprof-disable --api-hosts 127.0.0.1:50051 &
gobgpd_pid=$!
trap 'kill -TERM "$gobgpd_pid" 2>/dev/null' TERM INT

# sync FAMILY (4 or 6): the kernel's bgp routes of that family become the RIB's prefixes with every path's next hop.
sync() {
	local fam=$1 afi=ipv$1 full=32 rib want dst hops args h
	[ "$fam" = 6 ] && full=128
	rib=$(gobgp -j global rib -a "$afi" 2>/dev/null) || return 0
	# "PREFIX NEXTHOP..." per prefix: NEXT_HOP (type 3) or MP_REACH_NLRI (type 14) of every path.
	want=$(jq -r 'to_entries[]? | .key + " " + ([.value[].attrs[]? | select(.type == 3 or .type == 14) | .nexthop] | unique | join(" "))' <<<"${rib:-null}")
	while read -r dst hops; do
		if [ -z "$dst" ] || [ -z "$hops" ]; then continue; fi
		args=()
		for h in $hops; do args+=(nexthop via "$h"); done
		ip -"$fam" route replace "$dst" proto bgp "${args[@]}" 2>/dev/null || true
	done <<<"$want"
	while read -r dst; do
		[ -n "$dst" ] || continue
		case $dst in */*) ;; *) dst=$dst/$full ;; esac
		grep -q "^$dst " <<<"$want" || ip -"$fam" route del "$dst" proto bgp 2>/dev/null || true
	done < <(ip -"$fam" -j route show proto bgp | jq -r '.[].dst')
}

while kill -0 "$gobgpd_pid" 2>/dev/null; do
	sync 4
	sync 6
	sleep 0.5
done
wait "$gobgpd_pid"
