#!/usr/bin/env bash
# shellcheck disable=SC2016 # the scripts given to run_lab are expanded by the bash that runs them
# Tests of the lab driver's shell library (run by `make lint`; needs neither root nor a built lab):
#  - a command that fails inside a step fails the command (lab up), also when a caller runs the step the way the
#    lab used to (`phase STEP || return 1`, where bash ignores errexit inside STEP);
#  - try_phase reports a failed step and lets the caller go on; phase keeps the variables a step sets;
#  - a daemon is stopped by PID only while the PID is still the process the lab started;
#  - `lab herald-up` installs the speaker DaemonSet only with LAB_SPEAKER=1, with NET_RAW and NET_ADMIN only, and
#    the controller with the Herald image for its svclb pods;
#  - the address plan: dual-stack by default (both families in the Kubernetes flags and the CNI config, per-node
#    IPv6 pod CIDRs inside the cluster's /56 and distinct), IPv4 only with LAB_IPV6=0.
# LAB_LIB=DIR tests the library in DIR instead (e.g. an older version of e2e/lab/lib).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
LIB=${LAB_LIB:-$HERE/lib}
REPO=$(cd "$LIB/../../.." && pwd)
WORK=$(mktemp -d)
trap '[ -n "${LAB_TEST_KEEP:-}" ] || rm -rf "$WORK"' EXIT
failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
pass() { echo "ok:   $*"; }

# run_lab SCRIPT: run SCRIPT in a fresh bash that has sourced the library the way e2e/lab/lab does; its output
# goes to $WORK/out, its exit status to $status.
run_lab() {
	local script=$1
	cat >"$WORK/run.sh" <<EOF
set -euo pipefail
export HERALD_LAB_STATE=$WORK/state HERALD_CACHE=$WORK/cache PATH=$WORK/bin:\$PATH
for f in common pki net cluster routers images apiservers nllb lifecycle standin demo; do source "$LIB/\$f.sh"; done
if declare -F lab_strict >/dev/null; then lab_strict; fi
$script
EOF
	set +e
	bash "$WORK/run.sh" >"$WORK/out" 2>&1
	status=$?
	set -e
}

# An openssl that fails, as it does for a bad argument or a full disk.
mkdir -p "$WORK/bin"
printf '#!/bin/sh\necho "openssl: simulated failure" >&2\nexit 1\n' >"$WORK/bin/openssl"
chmod +x "$WORK/bin/openssl"

# 1. The certificates step of `lab up` (the real pki_up) with a failing openssl, called the way `lab up` calls
#    its steps today: the command fails, the step does not report "done" and the next step does not run.
run_lab '
on_failure "lab up failed"
mkdir -p "$LAB_STATE"
phase "certificates" pki_up
echo "NEXT STEP RAN"'
if [ "$status" = 0 ] || grep -q "NEXT STEP RAN" "$WORK/out" || grep -q "<== certificates done" "$WORK/out"; then
	fail "a failing openssl in pki_up did not fail lab up (status $status):"
	sed 's/^/      /' "$WORK/out"
elif ! grep -q "FAILED (status 1): openssl" "$WORK/out" || ! grep -q "ERROR: lab up failed" "$WORK/out"; then
	fail "lab up failed but did not name the failed command and the command:"
	sed 's/^/      /' "$WORK/out"
else
	pass "a failing openssl in the certificates step fails lab up and is named"
fi

# 2. The same step called as the lab used to call steps: `phase NAME STEP || return 1` inside a command run as
#    `cmd || die`. Bash runs STEP with errexit off there; the library must not let that pass.
run_lab '
cmd_up() {
	mkdir -p "$LAB_STATE"
	phase "certificates" pki_up || return 1
	echo "NEXT STEP RAN"
}
cmd_up || die "lab up failed"'
if [ "$status" = 0 ] || grep -q "NEXT STEP RAN" "$WORK/out" || grep -q "<== certificates done" "$WORK/out"; then
	fail "'phase certificates pki_up || return 1' with a failing openssl reported success (status $status):"
	sed 's/^/      /' "$WORK/out"
else
	pass "'phase STEP || return 1' with a failing command inside STEP fails"
fi

# 3. A failure in a parallel part of a step (nodes_up runs node_up in background subshells) fails the step.
run_lab '
part() { false; echo "PART WENT ON"; }
parts() { part & wait $!; }
phase "parts in parallel" parts
echo "NEXT STEP RAN"'
if [ "$status" = 0 ] || grep -q -e "PART WENT ON" -e "NEXT STEP RAN" "$WORK/out"; then
	fail "a failing command in a background part of a step did not fail it (status $status):"
	sed 's/^/      /' "$WORK/out"
else
	pass "a failing command in a background part of a step fails the step"
fi

# 4. phase keeps the variables a step sets; try_phase reports a failed step, stops the step at the failing
#    command and lets the caller go on.
run_lab '
set_var() { STEP_VAR=set; }
phase "sets a variable" set_var
echo "STEP_VAR=$STEP_VAR"
step() { echo "STEP STARTED"; false; echo "STEP WENT ON"; }
try_phase "may fail" step
echo "PHASE_STATUS=$PHASE_STATUS"
try_phase "works" true
echo "PHASE_STATUS=$PHASE_STATUS"'
if [ "$status" != 0 ] || ! grep -q "STEP_VAR=set" "$WORK/out" || ! grep -q "STEP STARTED" "$WORK/out" ||
	grep -q "STEP WENT ON" "$WORK/out" || ! grep -q "PHASE_STATUS=1" "$WORK/out" ||
	! grep -q "PHASE_STATUS=0" "$WORK/out" || ! grep -q "<== may fail FAILED" "$WORK/out"; then
	fail "phase/try_phase (status $status):"
	sed 's/^/      /' "$WORK/out"
else
	pass "phase keeps a step's variables; try_phase stops a failed step and reports it"
fi

# 5. Daemons: the lab stops what it started, and never a process that took the PID of a pid file.
run_lab '
start_daemon sleeper sleep 300
pid=$(daemon_pid sleeper)
read -r p st boot <"$PIDS/sleeper.pid"
[ "$p" = "$pid" ] && [ -n "$st" ] && [ "$boot" = "$(boot_id)" ] || { echo "BAD PID FILE: $(cat "$PIDS/sleeper.pid")"; exit 1; }
stop_daemon sleeper 5
if kill -0 "$pid" 2>/dev/null && same_process "$pid" "$st"; then echo "SLEEPER STILL RUNS"; exit 1; fi
[ ! -e "$PIDS/sleeper.pid" ] || { echo "PID FILE LEFT"; exit 1; }

# An unrelated process, and pid files that name its PID: one from before the PID was reused (other start
# time), one of an older lab (PID only), one from before a reboot (other boot id).
sleep 300 &
other=$!
st=$(proc_start "$other")
echo "$other $((st - 1)) $(boot_id)" >"$PIDS/reused.pid"
echo "$other" >"$PIDS/legacy.pid"
echo "$other $st 00000000-0000-0000-0000-000000000000" >"$PIDS/rebooted.pid"
for n in reused legacy rebooted; do
	if pid_alive "$n"; then echo "PID_ALIVE TRUSTS $n"; fi
	stop_daemon "$n" 1
	stop_daemons 1 "$n"
done
if kill -0 "$other" 2>/dev/null; then echo "UNRELATED PROCESS SURVIVED"; kill "$other"; else echo "UNRELATED PROCESS KILLED"; fi'
if [ "$status" != 0 ] || ! grep -q "UNRELATED PROCESS SURVIVED" "$WORK/out" || grep -q "PID_ALIVE TRUSTS" "$WORK/out"; then
	fail "daemon identity (status $status):"
	sed 's/^/      /' "$WORK/out"
else
	pass "stop_daemon stops its daemon and leaves a process with a stale pid file's PID alone"
fi

# 6. No step is run as a condition anywhere in the lab's scripts (the run-time guard only sees the paths a run
#    takes).
if grep -nE '(^|[^_[:alnum:]])(if|while|until|!|&&|\|\|)[[:space:]]+(try_)?phase[[:space:]]|(^|[[:space:]])(try_)?phase[[:space:]].*(\|\||&&)' \
	"$HERE/lab" "$HERE/install.sh" "$LIB"/*.sh | grep -v '^[^:]*:[0-9]*:[[:space:]]*#'; then
	fail "phase or try_phase run as a condition (above)"
else
	pass "no phase runs as a condition in the lab's scripts"
fi

# 7. The address plan. Dual-stack (the default): both families, IPv4 first, in every flag and config that takes
#    them; node I's IPv6 pod CIDR is a /64 inside the cluster's /56, distinct for every node the lab allows; the
#    host blocks the IPv6 service and pod ranges. The CNI config is valid JSON (checked with jq when installed).
run_lab '
echo "SERVICES=$(service_cidrs)"
echo "CLUSTER=$(cluster_cidrs)"
echo "NODEIPS=$(node_ips 2)"
echo "BLOCKED6=$(host_unreachable_routes6)"
for ((i = 1; i <= 50; i++)); do echo "POD6 $(node_pod_cidr6 "$i")"; done
kube_proxy_config 2 | sed -n "s/^clusterCIDR: /PROXY=/p"
cni_config 2 >"$LAB_STATE.cni.json"
if command -v jq >/dev/null; then
	jq -r ".plugins[0].ipam.ranges[][].subnet, .plugins[0].ipam.routes[].dst" "$LAB_STATE.cni.json" | sed "s/^/CNI /"
else
	grep -oE "\"(subnet|dst)\": \"[^\"]*\"" "$LAB_STATE.cni.json" | sed "s/.*: \"\(.*\)\"/CNI \1/"
fi'
want_dual="SERVICES=10.96.0.0/16,fd48:4c96::/112
CLUSTER=10.244.0.0/16,fd48:4cf4::/56
NODEIPS=10.250.0.12,fd48:4c00::12
PROXY=10.244.0.0/16,fd48:4cf4::/56
CNI 10.244.2.0/24
CNI fd48:4cf4:0:2::/64
CNI 0.0.0.0/0
CNI ::/0"
pods6=$(sed -n 's/^POD6 //p' "$WORK/out")
bad6=$(echo "$pods6" | grep -vE '^fd48:4cf4:0:[0-9a-f]{1,2}::/64$' || true)
if [ "$status" != 0 ] || [ "$(grep -vE '^(POD6|BLOCKED6)' "$WORK/out")" != "$want_dual" ] ||
	[ "$(echo "$pods6" | sort -u | wc -l)" != 50 ] || [ -n "$bad6" ] ||
	! grep -q '^BLOCKED6=.*fd48:4c96::/112' "$WORK/out" || ! grep -q '^BLOCKED6=.*fd48:4cf4::/56' "$WORK/out"; then
	fail "dual-stack address plan (status $status; pod CIDRs outside fd48:4cf4::/56: ${bad6:-none}):"
	sed 's/^/      /' "$WORK/out"
else
	pass "dual-stack by default: both families in the flags, kube-proxy and CNI; 50 distinct IPv6 pod /64s in the /56"
fi

# 8. LAB_IPV6=0: IPv4 only everywhere.
LAB_IPV6=0 run_lab '
echo "SERVICES=$(service_cidrs)"
echo "CLUSTER=$(cluster_cidrs)"
echo "NODEIPS=$(node_ips 2)"
kube_proxy_config 2 | sed -n "s/^clusterCIDR: /PROXY=/p"
cni_config 2 | grep -E "subnet|dst" | tr -d " " | sed "s/^/CNI /"'
if [ "$status" != 0 ] || grep -q '::' "$WORK/out" ||
	[ "$(grep -c . "$WORK/out")" != 6 ]; then
	fail "LAB_IPV6=0 (status $status):"
	sed 's/^/      /' "$WORK/out"
else
	pass "LAB_IPV6=0: IPv4 only in the flags, kube-proxy and CNI"
fi

# 9. lab herald-up / herald-down against a helm that records what it is asked: helm upgrade --install of the repo's
#    chart with the lab's values, the image and memberlist profile, the speakers only with LAB_SPEAKER=1, waiting for
#    the pods; herald-down uninstalls the release. (What the chart renders is tested by the chart's own tests.)
mkdir -p "$WORK/cache/helm-v3.22.0/bin" "$WORK/state/logs"
cat >"$WORK/cache/helm-v3.22.0/bin/helm" <<'EOF'
#!/bin/sh
echo "helm $*" >>"$HELM_LOG"
exit 0
EOF
chmod +x "$WORK/cache/helm-v3.22.0/bin/helm"
herald_up_log() {
	rm -f "$WORK/helm.log"
	HELM_LOG=$WORK/helm.log run_lab 'herald_up; herald_down'
	touch "$WORK/helm.log"
}
LAB_SPEAKER=0 herald_up_log
off=$(cat "$WORK/helm.log")
off_status=$status
LAB_SPEAKER=1 HERALD_IMAGE=localhost/herald:test herald_up_log
on=$(cat "$WORK/helm.log")
install_on=$(grep -F 'upgrade --install' <<<"$on" || true)
if [ "$off_status" != 0 ] || [ "$status" != 0 ] || ! grep -qF -- '--set speaker.enabled=false' <<<"$off" ||
	! grep -qF -- "upgrade --install herald $REPO/charts/herald --namespace herald-system" <<<"$install_on" ||
	! grep -qF -- "-f $REPO/e2e/lab/manifests/herald-values.yaml" <<<"$install_on" ||
	! grep -qF -- '--set image.repository=localhost/herald --set image.tag=test' <<<"$install_on" ||
	! grep -qF -- '--set memberlist.profile=fast --set speaker.enabled=true' <<<"$install_on" ||
	! grep -qF -- '--wait' <<<"$install_on" || ! grep -qF -- '-n herald-system uninstall herald --wait' <<<"$on"; then
	fail "herald-up / herald-down with and without LAB_SPEAKER (status $off_status, $status):"
	{
		echo "--- LAB_SPEAKER=0:"
		echo "$off"
		echo "--- LAB_SPEAKER=1:"
		echo "$on"
		cat "$WORK/out"
	} | sed 's/^/      /'
else
	pass "lab herald-up is helm upgrade --install of charts/herald with the lab's values and image, the speakers only with LAB_SPEAKER=1; herald-down uninstalls"
fi
# LAB_MEMBERLIST_PROFILE reaches the chart's values; a profile the speaker does not know is refused before helm is
# called at all.
LAB_SPEAKER=1 LAB_MEMBERLIST_PROFILE=default herald_up_log
def_status=$status
def_set=$(grep -oF -- '--set memberlist.profile=default' "$WORK/helm.log" || true)
LAB_SPEAKER=1 LAB_MEMBERLIST_PROFILE=turbo herald_up_log
if [ "$def_status" != 0 ] || [ "$def_set" != '--set memberlist.profile=default' ] ||
	[ "$status" = 0 ] || [ -s "$WORK/helm.log" ]; then
	fail "LAB_MEMBERLIST_PROFILE (default: status $def_status, '$def_set'; turbo: status $status)"
else
	pass "LAB_MEMBERLIST_PROFILE=default reaches memberlist.profile; an unknown profile is refused"
fi

if [ "$failures" -gt 0 ]; then
	echo "lab library tests: $failures failed"
	exit 1
fi
echo "lab library tests: all passed"
