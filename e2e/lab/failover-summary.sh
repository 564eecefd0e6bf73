#!/usr/bin/env bash
# failover-summary.sh LOG: the p50, p99 and max of the longest gap per memberlist profile and failover case, from the FAILOVER lines
# that TestL2SpeakerAnswersAndFailsOver logs (make bench-failover).
set -euo pipefail
log=${1:?usage: failover-summary.sh LOG}
awk '/FAILOVER/ {
	c = "other"
	if ($0 ~ /kill -9/) c = "(a) kill -9 of the announcing speaker"
	else if ($0 ~ /link of/) c = "(b) link of the announcing node cut"
	else if ($0 ~ /graceful stop/) c = "(c) graceful stop (speaker Pod deleted)"
	# The memberlist profile, "[fast]" in the line (lines without one are from before profiles were logged).
	p = "fast"
	if (match($0, /FAILOVER \[[a-z]+\]/)) p = substr($0, RSTART + 10, RLENGTH - 11)
	c = p ": " c
	v = $0
	sub(/.*longest gap /, "", v)
	ms = v + 0
	if (v ~ /µs$/) ms = (v + 0) / 1000
	else if (v ~ /ms$/) ms = v + 0
	else if (v ~ /s$/) ms = (v + 0) * 1000
	printf "%s\t%.1f\n", c, ms
}' "$log" | "$(dirname "$0")/percentiles.sh"
