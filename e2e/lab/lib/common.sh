# shellcheck shell=bash disable=SC2034 # settings used by the other parts
# Common settings for the Herald lab. Sourced by install.sh and the lab driver.

LAB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$LAB_DIR/../.." && pwd)

K8S_VERSION=${K8S_VERSION:-v1.37.2}
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}
HELM_VERSION=${HELM_VERSION:-v3.22.0}

HERALD_CACHE=${HERALD_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/herald}
K8S_BIN=$HERALD_CACHE/k8s-$K8S_VERSION/bin
ETCD_BIN=$HERALD_CACHE/etcd-$ETCD_VERSION/bin
HELM_BIN=$HERALD_CACHE/helm-$HELM_VERSION/bin

K8S_BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubelet kubectl)
# kubeadm is built from the same wrapper module, as its own step (install.sh kubeadm, for the kind node image), so
# adding it to a cache that already holds the binaries above builds kubeadm alone.
K8S_EXTRA_BINARIES=(kubeadm)

# Debian packages the lab needs (prometheus: the e2e suite runs it with the chart's alert rules).
APT_PACKAGES=(containerd runc containernetworking-plugins iptables nftables gobgpd frr arping ndisc6
	tcpdump openssl conntrack iproute2 iputils-ping util-linux procps curl socat ca-certificates haproxy prometheus)
# Debian packages `make lint` needs (install.sh lint): shellcheck, and prometheus for its promtool (make alerts-check
# checks and unit-tests the chart's alert rules with it).
LINT_APT_PACKAGES=(shellcheck prometheus)

_t0=${LAB_T0:-$(date +%s)}
export LAB_T0=$_t0 # lab commands started by a lab command keep counting from the first one's start
log() { printf '[%4ss] %s\n' "$(($(date +%s) - _t0))" "$*" >&2; }
die() {
	trap - ERR # the message says it
	log "ERROR: $*"
	exit 1
}

# have_all DIR NAME...: every NAME is an executable in DIR.
have_all() {
	local dir=$1 b
	shift
	for b in "$@"; do [ -x "$dir/$b" ] || return 1; done
}

# ---- Running steps so that a failing command fails the command ----
#
# The lab's scripts run under `set -eEuo pipefail`: a command that fails ends the script. But bash switches that
# off for everything that runs as a condition — `f || ...`, `f && ...`, `if f`, `while f`, `until f`, `! f` —
# functions and subshells included, and no `set -e` inside can switch it back on. `phase step || return 1` thus
# ran the whole step with errexit off: a failed `ip` or `openssl` inside was ignored and the step reported
# "done". So: steps are never run as conditions. `phase` runs a step in the current shell (its variables
# stay set) and a failure inside ends the script; `try_phase` runs a step whose failure the caller handles, in
# a subshell where errexit holds, and leaves its status in PHASE_STATUS. Both refuse to run where bash would
# ignore errexit.

# lab_strict: the shell options and traps every lab entry point runs with.
lab_strict() {
	set -eEuo pipefail
	shopt -s inherit_errexit
	_lab_err_trap_on
	trap _lab_exit_trap EXIT
}

# The ERR trap names the command that failed (set -E passes it on to functions and subshells).
_lab_err_trap_on() {
	trap 'log "FAILED (status $?): $BASH_COMMAND  [${BASH_SOURCE[0]##*/}:$LINENO in ${FUNCNAME[0]:-main}]"' ERR
}

_LAB_PHASES=()     # the phases being run, outermost first
_LAB_ON_FAILURE="" # what to say when the script fails (on_failure)

_lab_exit_trap() {
	local rc=$?
	trap - ERR
	if [ "$rc" != 0 ]; then
		if [ ${#_LAB_PHASES[@]} -gt 0 ]; then log "<== FAILED: ${_LAB_PHASES[*]}"; fi
		if [ -n "$_LAB_ON_FAILURE" ]; then log "ERROR: $_LAB_ON_FAILURE"; fi
	fi
	return 0 # the script's exit status stays $rc
}

# on_failure MESSAGE: say MESSAGE if the script ends with a failure from now on.
on_failure() { _LAB_ON_FAILURE=$1; }

# require_errexit WHAT: die unless a failing command here would end the script, i.e. unless the caller runs WHAT
# plainly and not as a condition (see above). Must itself be called plainly.
require_errexit() {
	local rc
	case $- in *e*) ;; *) die "$1: errexit is off (set -e)" ;; esac
	trap - ERR
	set +e
	(
		set -e
		false
		exit 0
	)
	rc=$?
	set -e
	_lab_err_trap_on
	[ "$rc" != 0 ] || die "$1: run as a condition (if/while/until, left of || or &&, after !), where bash ignores errors inside; run it plainly (or with try_phase)"
}

_elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# phase NAME CMD...: run a step in the current shell and print how long it took. A command that fails inside the
# step ends the script (the exit trap names the phase). Call it plainly, never as a condition.
phase() {
	local name=$1 s
	shift
	require_errexit "phase \"$name\""
	s=$(date +%s.%N)
	log "==> $name"
	_LAB_PHASES+=("$name")
	"$@"
	unset '_LAB_PHASES[-1]'
	log "<== $name done in $(_elapsed "$s")s"
}

# try_phase NAME CMD...: run a step whose failure the caller deals with; PHASE_STATUS is its exit status. The step
# runs in a subshell with errexit in force (the first failing command ends the step), so it cannot set the
# caller's variables. Call it plainly (try_phase ...; if [ "$PHASE_STATUS" = 0 ] ...), never as a condition.
PHASE_STATUS=0
try_phase() {
	local name=$1 s
	shift
	require_errexit "try_phase \"$name\""
	s=$(date +%s.%N)
	log "==> $name"
	# The subshell's failure is reported here, not by the ERR trap as if it ended the script.
	trap - ERR
	set +e
	(
		set -e
		_lab_err_trap_on
		"$@"
	)
	PHASE_STATUS=$?
	set -e
	_lab_err_trap_on
	if [ "$PHASE_STATUS" = 0 ]; then
		log "<== $name done in $(_elapsed "$s")s"
	else
		log "<== $name FAILED (status $PHASE_STATUS) after $(_elapsed "$s")s"
	fi
}

# ---- Lab topology and settings (everything the lab makes is named with $P) ----
P=${LAB_PREFIX:-hl-}
LAB_NODES=${LAB_NODES:-3}
LAB_STATE=${HERALD_LAB_STATE:-/run/herald-lab} # world-traversable: FRR runs as the frr user
PIDS=$LAB_STATE/pids
LOGS=$LAB_STATE/logs

NS_LAN=${P}lan
NS_CLIENT=${P}client
NS_GOBGP=${P}gobgp
NS_FRR=${P}frr
NS_EXT=${P}ext
HOST_IF=${P}host

LAN4_NET=10.250.0.0/24
LAN6_NET=fd48:4c00::/64
HOST4=10.250.0.1
HOST6=fd48:4c00::1
CLIENT4=10.250.0.100
CLIENT6=fd48:4c00::100
GOBGP4=10.250.0.201
GOBGP6=fd48:4c00::201
FRR4=10.250.0.202
FRR6=fd48:4c00::202
# A client behind the FRR router, on its own subnet: it reaches BGP addresses only through BGP routes.
EXT_NET4=10.252.0.0/24
EXT_NET6=fd48:4c02::/64
EXT_GW4=10.252.0.1
EXT_GW6=fd48:4c02::1
EXT4=10.252.0.2
EXT6=fd48:4c02::2
# Load-balancer ranges: L2 addresses on the lan, BGP addresses off the lan (reached through routers).
LB_L2_RANGE=10.250.0.64/27
LB_L2_RANGE6=fd48:4c00::64:0/112
LB_BGP_RANGE=10.251.0.0/24
LB_BGP_RANGE6=fd48:4c01::/64
SERVICE_CIDR=10.96.0.0/16
CLUSTER_CIDR=10.244.0.0/16
# IPv6 for the cluster (LAB_IPV6=1, the default: dual-stack, IPv4 primary; LAB_IPV6=0: single-stack IPv4). The
# prefixes follow the lab's plan (fd48:4c00::/64 lan, fd48:4c01::/64 BGP, fd48:4c02::/64 ext) and echo their
# IPv4 counterparts: services fd48:4c96::/112 (10.96.0.0/16), pods fd48:4cf4::/56 (10.244.0.0/16), node I's
# pods fd48:4cf4:0:I::/64 (10.244.I.0/24).
LAB_IPV6=${LAB_IPV6:-1}
# kube-proxy's mode on every node: iptables (the default) or nftables (make e2e-nftables).
LAB_KUBE_PROXY_MODE=${LAB_KUBE_PROXY_MODE:-iptables}
SERVICE_CIDR6=fd48:4c96::/112
CLUSTER_CIDR6=fd48:4cf4::/56
APISERVER_PORT=6443
ETCD_CLIENT_PORT=23790
ETCD_PEER_PORT=23800
# BGP: nodes (speakers) use NODE_ASN; the routers peer passively with any lan address.
NODE_ASN=64500
GOBGP_ASN=64501
FRR_ASN=64502
GOBGP_API_PORT=50051

# LAB_EXTERNAL_CLOUD_NODES: node numbers (comma-separated) whose kubelets run with --cloud-provider=external.
LAB_EXTERNAL_CLOUD_NODES=${LAB_EXTERNAL_CLOUD_NODES:-}
external_cloud_node() { [[ ",$LAB_EXTERNAL_CLOUD_NODES," == *",$1,"* ]]; }

node_name() { echo "${P}node$1"; }          # also the Kubernetes node name
node_ip4() { echo "10.250.0.$((10 + $1))"; }
node_ip6() { echo "fd48:4c00::$((10 + $1))"; }
node_pod_cidr() { echo "10.244.$1.0/24"; }
node_pod_cidr6() { echo "fd48:4cf4:0:$1::/64"; } # I in hex digits as written: node 12 -> :12:, unique up to 50
# The cluster's ranges as Kubernetes flags take them: IPv4 first (the primary family), then IPv6 if enabled.
lab_ipv6() { [ "$LAB_IPV6" = 1 ]; }
service_cidrs() { if lab_ipv6; then echo "$SERVICE_CIDR,$SERVICE_CIDR6"; else echo "$SERVICE_CIDR"; fi; }
cluster_cidrs() { if lab_ipv6; then echo "$CLUSTER_CIDR,$CLUSTER_CIDR6"; else echo "$CLUSTER_CIDR"; fi; }
node_ips() { if lab_ipv6; then echo "$(node_ip4 "$1"),$(node_ip6 "$1")"; else node_ip4 "$1"; fi; }
node_dir() { echo "$LAB_STATE/$(node_name "$1")"; }

PAUSE_IMAGE=registry.k8s.io/pause:3.10
ECHO_IMAGE=${ECHO_IMAGE:-localhost/herald-lab/echo:dev}
HERALD_IMAGE=${HERALD_IMAGE:-localhost/herald:dev}
# LAB_SPEAKER=1: `lab herald-up` installs the Herald speaker DaemonSet too (the e2e suites that need it set it).
# `lab demo` runs the speaker unless LAB_SPEAKER=0 is given.
LAB_SPEAKER_DEMO=${LAB_SPEAKER:-1}
LAB_SPEAKER=${LAB_SPEAKER:-0}
# LAB_MEMBERLIST_PROFILE: the speakers' memberlist profile (--memberlist-profile): fast (Herald's default) or default.
LAB_MEMBERLIST_PROFILE=${LAB_MEMBERLIST_PROFILE:-fast}
IMAGES_DIR=$LAB_STATE/images

need_root() { [ "$(id -u)" = 0 ] || die "the lab needs root (network namespaces, mounts)"; }

# in_ns NS CMD...: run in a lab namespace's network namespace (without remounting /sys).
in_ns() { local ns=$1; shift; nsenter --net="/var/run/netns/$ns" -- "$@"; }

kubectl_lab() { "$K8S_BIN/kubectl" --kubeconfig "$LAB_STATE/admin.kubeconfig" "$@"; }

# ---- Daemons, recorded by identity ----
#
# A pid file holds "PID START BOOT": the PID, the process's start time (clock ticks after boot, field 22 of
# /proc/PID/stat, which an exec keeps) and the kernel's boot id. The lab signals a PID only while all three still
# match: a stale pid file (the daemon died, the machine rebooted, the PID went to another process) never makes it
# kill anything else. Pid files without a start time (older labs) are not trusted; `lab down` finds those
# daemons by their network namespace or the state dir on their command line.

boot_id() { cat /proc/sys/kernel/random/boot_id; }

# proc_start PID: the start time of the live (not zombie) process PID; fails if there is none.
proc_start() {
	local stat f
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	# comm (field 2) may hold spaces and parentheses: split after its closing parenthesis (field 3 = f[0]).
	read -ra f <<<"${stat##*) }"
	[ "${f[0]}" != Z ] && [ -n "${f[19]:-}" ] || return 1
	echo "${f[19]}"
}

# same_process PID START: PID is still the process that started at START.
same_process() {
	local st
	st=$(proc_start "$1") || return 1
	[ "$st" = "$2" ]
}

# start_daemon NAME CMD...: start CMD detached (own session), log to $LOGS/NAME.log, record its identity.
# CMD must exec down to the daemon (nsenter/unshare/sh -c 'exec ...') so that the PID is the daemon's.
start_daemon() {
	local name=$1 pid st
	shift
	mkdir -p "$PIDS" "$LOGS"
	setsid "$@" </dev/null >>"$LOGS/$name.log" 2>&1 &
	pid=$!
	# The child has not been waited for, so its /proc entry is there even if it already exited.
	st=$(proc_start "$pid") || st=exited
	echo "$pid $st $(boot_id)" >"$PIDS/$name.pid"
}

# daemon_pid NAME: print the PID of daemon NAME if the process the lab recorded still runs; fail otherwise.
daemon_pid() {
	local f=$PIDS/$1.pid pid="" st="" boot=""
	[ -f "$f" ] || return 1
	read -r pid st boot <"$f" || true
	[ -n "$pid" ] && [ -n "$st" ] && [ "$boot" = "$(boot_id)" ] || return 1
	same_process "$pid" "$st" || return 1
	echo "$pid"
}

pid_alive() { daemon_pid "$1" >/dev/null; }

# stop_daemon NAME [TIMEOUT]: SIGTERM the recorded process, SIGKILL after TIMEOUT seconds (default 10); only
# while it is the process the lab started (see above).
stop_daemon() {
	local name=$1 t=${2:-10} pid st i
	[ -f "$PIDS/$name.pid" ] || return 0
	if pid=$(daemon_pid "$name"); then
		read -r _ st _ <"$PIDS/$name.pid"
		kill -TERM "$pid" 2>/dev/null || true
		for ((i = 0; i < t * 10; i++)); do same_process "$pid" "$st" || break; sleep 0.1; done
		if same_process "$pid" "$st"; then
			log "  $name ($pid) did not stop in ${t}s: SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			for ((i = 0; i < 50; i++)); do same_process "$pid" "$st" || break; sleep 0.1; done
		fi
	elif [ "${LAB_DEBUG:-}" = 1 ]; then
		log "  $name: the recorded process no longer runs (pid file: $(cat "$PIDS/$name.pid")): nothing to stop"
	fi
	rm -f "$PIDS/$name.pid"
	[ "${LAB_DEBUG:-}" != 1 ] || log "  stopped $name"
}

# wait_for DESC TIMEOUT CMD...: poll CMD every 0.2 s until it succeeds.
wait_for() {
	local desc=$1 t=$2 end; shift 2
	end=$(($(date +%s) + t))
	until "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -lt "$end" ] || { log "timeout after ${t}s waiting for $desc"; return 1; }
		sleep 0.2
	done
}

# stop_daemons TIMEOUT NAME...: like stop_daemon for several daemons at once (SIGTERM all, then wait).
stop_daemons() {
	local t=$1 name
	shift
	local pid
	for name in "$@"; do
		if pid=$(daemon_pid "$name"); then kill -TERM "$pid" 2>/dev/null || true; fi
	done
	for name in "$@"; do stop_daemon "$name" "$t"; done
}
