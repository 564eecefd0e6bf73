#!/usr/bin/env bash
# bgp-timing-summary.sh LOG: p50, p99 and max per BGP timing case and router, from the BGPTIMING lines that
# TestBGPTiming logs (make bench-bgp).
set -euo pipefail
log=${1:?usage: bgp-timing-summary.sh LOG}
awk '/BGPTIMING/ {
	line = $0
	sub(/.*BGPTIMING /, "", line)
	sub(/ \([^)]*\)$/, "", line) # the node, when named
	i = index(line, ": ")
	key = substr(line, 1, i - 1)
	v = substr(line, i + 2)
	ms = v + 0
	if (v ~ /µs$/) ms = (v + 0) / 1000
	else if (v ~ /ms$/) ms = v + 0
	else if (v ~ /m[0-9.]+s$/) { split(v, p, "m"); ms = (p[1] * 60 + p[2]) * 1000 }
	else if (v ~ /s$/) ms = (v + 0) * 1000
	printf "%s\t%.1f\n", key, ms
}' "$log" | "$(dirname "$0")/percentiles.sh"
