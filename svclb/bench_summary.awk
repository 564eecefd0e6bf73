# Summarises rounds of BenchmarkForward (make bench-svclb): per path the
# median, min and max of the throughput (Gbit/s) and of the round-trip time
# (µs), and nftables/userspace against direct: the ratio (throughput) or the
# difference (latency) of the medians, and the median of the per-round ratios
# or differences (rounds are interleaved, so a pair shares the machine's load).
/^BenchmarkForward\// {
	name = $1
	sub(/^BenchmarkForward\//, "", name)
	sub(/-[0-9]+$/, "", name)
	for (i = 2; i < NF; i++) {
		if ($(i + 1) == "Gbit/s" || $(i + 1) == "µs/rtt") {
			n[name]++
			v[name, n[name]] = $i
			unit[name] = $(i + 1)
		}
	}
}
function median(name,    i, j, t, k) {
	k = n[name]
	for (i = 1; i <= k; i++) s[i] = v[name, i] + 0
	for (i = 2; i <= k; i++) {
		t = s[i]
		for (j = i - 1; j >= 1 && s[j] > t; j--) s[j + 1] = s[j]
		s[j + 1] = t
	}
	lo = s[1]; hi = s[k]
	if (k % 2) return s[(k + 1) / 2]
	return (s[k / 2] + s[k / 2 + 1]) / 2
}
END {
	split("throughput latency", kinds, " ")
	split("direct nftables userspace", paths, " ")
	for (a = 1; a <= 2; a++) {
		base = median(kinds[a] "/direct")
		for (b = 1; b <= 3; b++) {
			name = kinds[a] "/" paths[b]
			if (!n[name]) continue
			m = median(name)
			line = sprintf("SVCLB %-21s median %7.2f %-6s (min %.2f, max %.2f, %d rounds)", name, m, unit[name], lo, hi, n[name])
			d = kinds[a] "/direct"
			if (b > 1 && n[name] == n[d]) {
				for (i = 1; i <= n[name]; i++) {
					if (kinds[a] == "throughput") v["pair", i] = 100 * v[name, i] / v[d, i]
					else v["pair", i] = v[name, i] - v[d, i]
				}
				n["pair"] = n[name]
				pm = median("pair")
			}
			if (b > 1 && kinds[a] == "throughput") line = line sprintf("  %.1f %% of direct (per round: median %.1f %%, %.1f-%.1f)", 100 * m / base, pm, lo, hi)
			if (b > 1 && kinds[a] == "latency") line = line sprintf("  %+.2f µs vs direct (per round: median %+.2f, %+.2f to %+.2f)", m - base, pm, lo, hi)
			print line
		}
	}
}
