# shellcheck shell=bash
# lab up / down / status.

lab_is_up() {
	[ -f "$LAB_STATE/up" ] && pid_alive kube-apiserver && apiserver_ready
}

preflight() {
	need_root
	local c missing=0
	for c in containerd runc ctr gobgpd vtysh nsenter unshare iptables openssl curl; do
		command -v "$c" >/dev/null || missing=1
	done
	[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/frr/bgpd ] || missing=1
	[ $missing = 0 ] || "$LAB_DIR/install.sh" apt
	have_all "$K8S_BIN" "${K8S_BINARIES[@]}" etcd || "$LAB_DIR/install.sh" k8s etcd
	if [ "$LAB_NODES" -lt 1 ] || [ "$LAB_NODES" -gt 50 ]; then die "LAB_NODES must be 1..50"; fi
	case $LAB_IPV6 in 0 | 1) ;; *) die "LAB_IPV6 must be 1 (dual-stack, the default) or 0 (IPv4 only)" ;; esac
	case $LAB_KUBE_PROXY_MODE in iptables | nftables) ;; *) die "LAB_KUBE_PROXY_MODE=$LAB_KUBE_PROXY_MODE: want iptables or nftables" ;; esac
	check_apiservers
	check_nllb
	if ! [[ $LAB_EXTERNAL_CLOUD_NODES =~ ^([0-9]+(,[0-9]+)*)?$ ]]; then
		die "LAB_EXTERNAL_CLOUD_NODES=$LAB_EXTERNAL_CLOUD_NODES: want node numbers, e.g. 3 or 2,3"
	fi
}

write_env() {
	local i pod6
	{
		echo "LAB_PREFIX=$P"
		echo "LAB_NODES=$LAB_NODES"
		echo "LAB_STATE=$LAB_STATE"
		echo "KUBECONFIG=$LAB_STATE/admin.kubeconfig"
		echo "K8S_BIN=$K8S_BIN"
		echo "NS_LAN=$NS_LAN"
		echo "NS_CLIENT=$NS_CLIENT"
		echo "NS_GOBGP=$NS_GOBGP"
		echo "NS_FRR=$NS_FRR"
		echo "HOST_IF=$HOST_IF"
		echo "HOST4=$HOST4"
		echo "CLIENT4=$CLIENT4"
		echo "CLIENT6=$CLIENT6"
		echo "NS_EXT=$NS_EXT"
		echo "EXT4=$EXT4"
		echo "EXT6=$EXT6"
		echo "GOBGP4=$GOBGP4"
		echo "GOBGP6=$GOBGP6"
		echo "FRR4=$FRR4"
		echo "FRR6=$FRR6"
		echo "GOBGP_API_PORT=$GOBGP_API_PORT"
		echo "FRR_VTY_DIR=$(FRR_DIR)/run"
		echo "NODE_ASN=$NODE_ASN"
		echo "GOBGP_ASN=$GOBGP_ASN"
		echo "FRR_ASN=$FRR_ASN"
		echo "LB_L2_RANGE=$LB_L2_RANGE"
		echo "LB_L2_RANGE6=$LB_L2_RANGE6"
		echo "LB_BGP_RANGE=$LB_BGP_RANGE"
		echo "LB_BGP_RANGE6=$LB_BGP_RANGE6"
		echo "LAB_IPV6=$LAB_IPV6"
		echo "SERVICE_CIDRS=$(service_cidrs)"
		echo "CLUSTER_CIDRS=$(cluster_cidrs)"
		echo "ECHO_IMAGE=$ECHO_IMAGE"
		echo "HERALD_IMAGE=$HERALD_IMAGE"
		echo "HERALD_IMAGE_BUILT=$([ -f "$IMAGE_CACHE/herald.tar" ] && echo 1 || echo 0)"
		echo "LAB_APISERVERS=$LAB_APISERVERS"
		for ((i = 1; i <= LAB_APISERVERS; i++)); do echo "APISERVER_$i=$(apiserver_ip4 "$i"):$APISERVER_PORT"; done
		echo "LAB_NLLB=$LAB_NLLB"
		echo "LAB_EXTERNAL_CLOUD_NODES=$LAB_EXTERNAL_CLOUD_NODES"
		if [ "$LAB_NLLB" = 1 ]; then
			echo "NLLB_METRICS_PORT=$NLLB_METRICS_PORT"
			echo "LAB_NLLB_FEED=$LAB_NLLB_FEED"
			echo "NLLB_SHARED_DIR=$NLLB_SHARED_DIR"
			for ((i = 1; i <= LAB_NODES; i++)); do echo "NLLB_KUBECONFIG_$i=$(nllb_kubelet_kubeconfig "$i")"; done
		fi
		for ((i = 1; i <= LAB_NODES; i++)); do
			# name ipv4 ipv6 podcidr containerd-socket [podcidr6 (dual-stack)]
			pod6=""
			if lab_ipv6; then pod6=" $(node_pod_cidr6 "$i")"; fi
			echo "NODE_$i=$(node_name "$i") $(node_ip4 "$i") $(node_ip6 "$i") $(node_pod_cidr "$i") $(node_containerd_sock "$i")$pod6"
		done
	} >"$LAB_STATE/lab.env"
}

nodes_ready() {
	local n
	n=$(kubectl_lab get nodes --no-headers 2>/dev/null | awk '$2 == "Ready"' | wc -l)
	[ "$n" -eq "$LAB_NODES" ]
}

wait_nodes_ready() {
	if ! wait_for "nodes Ready" 180 nodes_ready; then
		kubectl_lab get nodes -o wide >&2 || true
		return 1
	fi
}

# nodes_up: node_up for every node, in parallel subshells (errexit holds in each: the first failing command
# ends that node's subshell with its status).
nodes_up() {
	local i node_pids=() failed=0
	for ((i = 1; i <= LAB_NODES; i++)); do
		node_up "$i" &
		node_pids+=($!)
	done
	for ((i = 1; i <= LAB_NODES; i++)); do
		wait "${node_pids[i - 1]}" || { log "$(node_name "$i") failed to come up"; failed=1; }
	done
	return $failed
}

cmd_up() {
	preflight
	if lab_is_up; then
		log "lab is already up ($(cat "$LAB_STATE/up") nodes); 'lab down' first to recreate it"
		return 0
	fi
	if [ -d "$LAB_STATE" ] || [ -n "$(lab_netns)" ]; then
		log "removing leftovers of an earlier lab"
		# Its own process: teardown is best effort here, and a lab function run as a condition would run with
		# errexit off.
		"$LAB_DIR/lab" down >/dev/null 2>&1 || true
	fi
	local start
	start=$(date +%s.%N)
	mkdir -p "$LAB_STATE" "$PIDS" "$LOGS"
	echo "$LAB_NODES" >"$LAB_STATE/nodes"
	# containerd keeps shim sockets in /run/containerd/s and the CNI library its cache in /var/lib/cni whatever
	# the config says: if the lab makes those directories, it removes what stays empty of them on teardown.
	local dir
	for dir in /run/containerd /var/lib/cni; do
		[ -e "$dir" ] || echo "$dir" >>"$LAB_STATE/created-dirs"
	done
	# Each phase runs with errexit in force: the first command that fails ends `lab up` (see common.sh).
	phase "build images" images_build
	phase "network: lan bridge, $LAB_NODES nodes, client, routers" net_up
	phase "certificates" pki_up
	phase "control plane (etcd, $LAB_APISERVERS apiserver(s), controller-manager, scheduler)" controlplane_up
	if [ "$LAB_NLLB" = 1 ] && [ "$LAB_NLLB_FEED" = watch ]; then phase "RBAC: nodes may watch the default/kubernetes EndpointSlices (NLLB)" nllb_rbac; fi
	phase "routers (gobgpd, FRR)" routers_up
	phase "$LAB_NODES nodes in parallel (containerd, images, kubelet, kube-proxy)" nodes_up
	phase "wait for $LAB_NODES nodes Ready" wait_nodes_ready
	write_env
	echo "$LAB_NODES" >"$LAB_STATE/up"
	log "lab up ($(if lab_ipv6; then echo dual-stack; else echo IPv4 only; fi)) in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s"
	kubectl_lab get nodes -o wide
	echo
	echo "kubectl:   export KUBECONFIG=$LAB_STATE/admin.kubeconfig PATH=$K8S_BIN:\$PATH"
	echo "tear down: $LAB_DIR/lab down"
}

# Inode numbers of the lab's network namespaces: named ones and the pod namespaces under the state dir.
lab_netns_inodes() {
	local f
	for f in /var/run/netns/"$P"*; do if [ -e "$f" ]; then stat -L -c %i "$f" 2>/dev/null || true; fi; done
	if [ -d "$LAB_STATE" ]; then
		{ findmnt -rn -o TARGET | grep "^$LAB_STATE/" || true; } | while read -r f; do
			if [ -f "$f" ] && stat -L -f -c %T "$f" 2>/dev/null | grep -q nsfs; then stat -L -c %i "$f"; fi
		done
	fi
	true
}

# PIDs of processes left in the lab's network namespaces or naming the state dir (container shims).
lab_leftover_pids() {
	local inodes
	inodes=$(lab_netns_inodes | sed 's/.*/net:[&]/')
	{
		if [ -n "$inodes" ]; then
			find /proc/[0-9]*/ns/net -maxdepth 0 -printf '%l %p\n' 2>/dev/null |
				grep -F -f <(echo "$inodes") | sed -n 's|.* /proc/\([0-9]*\)/ns/net$|\1|p' || true
		fi
		grep -lsF -f <(echo "$LAB_STATE/") /proc/[0-9]*/cmdline 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/cmdline$|\1|p' || true
	} | { grep -vx -e "$$" -e "${BASHPID:-$$}" || true; } | sort -un
}

# kill_leftovers: SIGKILL the processes left in the lab (lab_leftover_pids), each identified by its PID and start
# time when it was found, so that a PID that went to another process in between is not killed.
kill_leftovers() {
	local pid st found=()
	for pid in $(lab_leftover_pids); do
		if st=$(proc_start "$pid"); then found+=("$pid:$st"); fi
	done
	[ ${#found[@]} -gt 0 ] || return 0
	log "killing leftover processes in the lab: ${found[*]%%:*}"
	for pid in "${found[@]}"; do
		if same_process "${pid%%:*}" "${pid#*:}"; then kill -KILL "${pid%%:*}" 2>/dev/null || true; fi
	done
	sleep 0.5
}

lab_mounts() { findmnt -rn -o TARGET | grep -e "^$LAB_STATE/" -e "^$LAB_STATE\$" -e "^/run/netns/$P" -e "^/var/run/netns/$P" || true; }

no_running_tasks() {
	local i
	for ((i = 1; i <= $1; i++)); do
		pid_alive "$(node_name "$i")-containerd" || continue
		node_ctr "$i" tasks ls 2>/dev/null | awk 'NR > 1 && $3 == "RUNNING" {found = 1} END {exit found}' || return 1
	done
}

# drain N: let the kubelets remove every pod the way they normally do (so that CNI DEL runs and the pods'
# network namespaces and CNI cache entries go away): stop the controllers first so nothing is recreated.
drain() {
	local nodes=$1
	pid_alive kube-apiserver || return 0
	stop_daemons 5 kube-controller-manager kube-scheduler
	kubectl_lab delete pods --all --all-namespaces --force --grace-period=0 --wait=false >/dev/null 2>&1 || true
	wait_for "the kubelets to stop all pods" 20 no_running_tasks "$nodes" || true
}

stop_nodes_routers() {
	local i
	for ((i = 1; i <= $1; i++)); do node_down "$i" & done
	routers_down &
	wait
}

# stop_all N: stop the nodes (in parallel), the routers and the control plane.
stop_all() {
	local nodes=$1 i
	try_phase "drain: the kubelets stop all pods" drain "$nodes"
	try_phase "stop nodes and routers" stop_nodes_routers "$nodes"
	try_phase "stop control plane" controlplane_down
}

cmd_down() {
	need_root
	local start i nodes p
	start=$(date +%s.%N)
	nodes=$(cat "$LAB_STATE/nodes" 2>/dev/null || echo "$LAB_NODES")
	rm -f "$LAB_STATE/up"
	# Teardown goes on after a failed step (try_phase): what is left is found and removed below, and the final
	# leftovers check decides the exit status.
	stop_all "$nodes"
	# Anything else recorded.
	if [ -d "$PIDS" ]; then
		for p in "$PIDS"/*.pid; do [ -e "$p" ] && stop_daemon "$(basename "$p" .pid)" 5; done
	fi
	log "looking for leftover processes"
	kill_leftovers
	log "unmounting $(lab_mounts | wc -l) mounts"
	for p in $(lab_mounts | awk '{print length, $0}' | sort -rn | cut -d' ' -f2-); do
		umount "$p" 2>/dev/null || umount -l "$p" 2>/dev/null || log "cannot unmount $p"
	done
	try_phase "remove network" net_down
	rm -f /var/lib/cni/results/"${P}"pods-* 2>/dev/null || true
	if [ -f "$LAB_STATE/created-dirs" ]; then
		sort -ru "$LAB_STATE/created-dirs" | while read -r p; do
			if [ -d "$p" ]; then find "$p" -depth -type d -empty -delete 2>/dev/null || true; fi
		done
	fi
	if [ -d "$LAB_STATE" ]; then
		rm -rf "$HERALD_CACHE/lab-last-logs"
		[ -d "$LOGS" ] && cp -a "$LOGS" "$HERALD_CACHE/lab-last-logs"
		rm -rf --one-file-system "$LAB_STATE"
	fi
	log "lab down in $(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')s (logs kept in $HERALD_CACHE/lab-last-logs)"
	lab_leftovers_report
}

# Prints what the lab left behind (namespaces, host interfaces, mounts, processes); fails if anything.
lab_leftovers_report() {
	local left=0 x
	x=$(lab_netns)
	[ -z "$x" ] || { log "left: namespaces: $x"; left=1; }
	x=$(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1 | grep "^$P" || true)
	[ -z "$x" ] || { log "left: interfaces: $x"; left=1; }
	x=$(lab_mounts)
	[ -z "$x" ] || { log "left: mounts: $x"; left=1; }
	x=$(lab_leftover_pids | tr '\n' ' ')
	[ -z "${x// /}" ] || { log "left: processes: $x"; left=1; }
	if nft list table inet "$NFT_TABLE" >/dev/null 2>&1; then
		log "left: nftables table inet $NFT_TABLE"
		left=1
	fi
	return $left
}

cmd_status() {
	local f name state pid
	if [ ! -d "$PIDS" ]; then
		echo "lab is down"
		return 0
	fi
	echo "processes:"
	for f in "$PIDS"/*.pid; do
		[ -e "$f" ] || continue
		name=$(basename "$f" .pid)
		if pid=$(daemon_pid "$name"); then state="running (pid $pid)"; else state="DEAD"; fi
		printf '  %-32s %s\n' "$name" "$state"
	done
	echo "namespaces: $(lab_netns | tr '\n' ' ')"
	if pid_alive kube-apiserver; then
		echo
		kubectl_lab get nodes -o wide 2>&1 || true
		echo
		echo "gobgpd neighbours:"
		gobgp_cli neighbor 2>&1 | sed 's/^/  /' || true
		echo "FRR:"
		frr_cli -c 'show bgp summary' 2>&1 | sed 's/^/  /' || true
	fi
	[ -f "$LAB_STATE/up" ] && echo "lab is up" || echo "lab is NOT fully up"
}
