#!/usr/bin/env bash
# percentiles.sh: reads "KEY<TAB>MILLISECONDS" lines on stdin and prints, per key (sorted), the number of values and
# their p50, p99 (nearest rank) and max. Used by failover-summary.sh and bgp-timing-summary.sh.
set -euo pipefail
sort -t$'\t' -k1,1 -k2,2n | awk -F'\t' '
# rank: the nearest-rank percentile p of the n sorted values.
function rank(p,   r, i) {
	r = p * n
	i = int(r)
	if (i < r) i++
	return g[i - 1]
}
function flush() {
	if (n > 0) printf "%-62s runs %3d  p50 %8.1f ms  p99 %8.1f ms  max %8.1f ms\n", cur, n, rank(0.5), rank(0.99), g[n - 1]
}
$1 != cur { flush(); cur = $1; n = 0 }
{ g[n++] = $2 }
END { flush() }'
