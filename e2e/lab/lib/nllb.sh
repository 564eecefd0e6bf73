# shellcheck shell=bash
# Several API servers and NLLB on the nodes (issue 11's lab).
#
# LAB_APISERVERS=N (1-3, default 1): N kube-apiservers share the one etcd. Server I listens on apiserver_ip4 I
# (server 1 on HOST4, the address every kubeconfig names: the nodes' seed) and reaches etcd on 127.0.0.I, so that
# one server alone can be cut from etcd (`lab apiserver-etcd I cut`: its /readyz fails, it still accepts TCP).
# LAB_NLLB=1: every node runs `herald nllb` as a host service in its namespace (before its kubelet), and its
# kubelet and kube-proxy use the patched kubeconfigs pointing at the node's loopback balancer.

LAB_APISERVERS=${LAB_APISERVERS:-1}
LAB_NLLB=${LAB_NLLB:-0}
# load_lab_settings: LAB_APISERVERS and LAB_NLLB of the running lab (commands after `lab up` need them).
load_lab_settings() {
	local v
	[ -f "$LAB_STATE/lab.env" ] || return 0
	v=$(sed -n 's/^LAB_APISERVERS=//p' "$LAB_STATE/lab.env")
	if [ -n "$v" ]; then LAB_APISERVERS=$v; fi
	v=$(sed -n 's/^LAB_NLLB=//p' "$LAB_STATE/lab.env")
	if [ -n "$v" ]; then LAB_NLLB=$v; fi
}
NLLB_PORT=7443
NLLB_METRICS_PORT=7574
NFT_TABLE=${P//-/_}etcd_cut # nftables table names allow letters, digits and _

apiserver_ip4() { if [ "$1" = 1 ]; then echo "$HOST4"; else echo "10.250.0.$1"; fi; }
apiserver_daemon() { if [ "$1" = 1 ]; then echo kube-apiserver; else echo "kube-apiserver-$1"; fi; }
apiserver_daemons() {
	local i
	for ((i = 1; i <= LAB_APISERVERS; i++)); do apiserver_daemon "$i"; done
}
etcd_client_urls() {
	local i urls=""
	for ((i = 1; i <= LAB_APISERVERS; i++)); do urls+="${urls:+,}http://127.0.0.$i:$ETCD_CLIENT_PORT"; done
	echo "$urls"
}

check_apiservers() {
	case $LAB_APISERVERS in 1 | 2 | 3) ;; *) die "LAB_APISERVERS=$LAB_APISERVERS: want 1, 2 or 3" ;; esac
	case $LAB_NLLB in 0 | 1) ;; *) die "LAB_NLLB=$LAB_NLLB: want 0 or 1" ;; esac
}

apiserver_ready_at() {
	curl -sf --max-time 2 --cacert "$LAB_STATE/pki/ca.crt" --cert "$LAB_STATE/pki/admin.crt" \
		--key "$LAB_STATE/pki/admin.key" "https://$(apiserver_ip4 "$1"):$APISERVER_PORT/readyz" >/dev/null
}

# apiserver_start I: start API server I (its address is added to the host's lan interface first).
apiserver_start() {
	local i=$1 pki=$LAB_STATE/pki ip
	ip=$(apiserver_ip4 "$i")
	if [ "$i" != 1 ]; then ip addr replace "$ip/24" dev "$HOST_IF"; fi
	start_daemon "$(apiserver_daemon "$i")" "$K8S_BIN/kube-apiserver" \
		--etcd-servers "http://127.0.0.$i:$ETCD_CLIENT_PORT" \
		--bind-address "$ip" --secure-port "$APISERVER_PORT" --advertise-address "$ip" \
		--tls-cert-file "$pki/apiserver.crt" --tls-private-key-file "$pki/apiserver.key" \
		--client-ca-file "$pki/ca.crt" \
		--kubelet-client-certificate "$pki/admin.crt" --kubelet-client-key "$pki/admin.key" \
		--kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$pki/sa.pub" --service-account-signing-key-file "$pki/sa.key" \
		--service-cluster-ip-range "$(service_cidrs)" \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--allow-privileged=true --profiling=false --v=1
	wait_for "kube-apiserver $i /readyz" 90 apiserver_ready_at "$i"
}

# apiservers_more_up: servers 2..N (server 1 is started by controlplane_up).
apiservers_more_up() {
	local i
	for ((i = 2; i <= LAB_APISERVERS; i++)); do apiserver_start "$i"; done
}

# cmd_apiserver stop|kill|start I: `lab apiserver`: SIGTERM (stop), SIGKILL (kill) or start API server I.
cmd_apiserver() {
	local what=${1:-} i=${2:-} pid
	load_lab_settings
	if ! [[ $i =~ ^[1-9]$ ]] || [ "$i" -gt "$LAB_APISERVERS" ]; then die "lab apiserver $what: want a server 1..$LAB_APISERVERS"; fi
	case $what in
	stop) stop_daemon "$(apiserver_daemon "$i")" 30 ;;
	kill)
		pid=$(daemon_pid "$(apiserver_daemon "$i")") || die "kube-apiserver $i does not run"
		kill -KILL "$pid"
		wait_for "kube-apiserver $i to exit" 10 bash -c "! kill -0 $pid 2>/dev/null"
		;;
	start)
		if pid_alive "$(apiserver_daemon "$i")"; then die "kube-apiserver $i already runs"; fi
		apiserver_start "$i"
		;;
	*) die "lab apiserver stop|kill|start I" ;;
	esac
}

# cmd_apiserver_etcd cut|restore I: `lab apiserver-etcd`: cut API server I from etcd (TCP resets on 127.0.0.I, in a
# table of the lab's own) or restore it. The server keeps accepting TCP; its /readyz fails.
cmd_apiserver_etcd() {
	local what=${1:-} i=${2:-}
	load_lab_settings
	if ! [[ $i =~ ^[1-9]$ ]] || [ "$i" -gt "$LAB_APISERVERS" ]; then die "lab apiserver-etcd $what: want a server 1..$LAB_APISERVERS"; fi
	case $what in
	cut)
		nft -f - <<EOT
table inet $NFT_TABLE {
	chain out {
		type filter hook output priority 0; policy accept;
		ip daddr 127.0.0.$i tcp dport $ETCD_CLIENT_PORT reject with tcp reset
	}
}
EOT
		;;
	restore) nft delete table inet "$NFT_TABLE" 2>/dev/null || true ;;
	*) die "lab apiserver-etcd cut|restore I" ;;
	esac
}

# ---- NLLB on the nodes ----

HERALD_HOST_BIN=$IMAGE_CACHE/bin/herald

nllb_kubelet_kubeconfig() { echo "$(node_dir "$1")/kubelet-nllb.kubeconfig"; }
nllb_proxy_kubeconfig() { echo "$(node_dir "$1")/kube-proxy-nllb.kubeconfig"; }
nllb_state_file() { echo "$(node_dir "$1")/nllb-upstreams.json"; }

# nllb_rbac: what `herald nllb --watch-endpoints` needs: nodes (group system:nodes) may list and watch the
# EndpointSlices in namespace default (docs/nllb.md).
nllb_rbac() {
	kubectl_lab apply -f - >/dev/null <<EOT
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: herald-nllb-endpoints, namespace: default}
rules:
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: herald-nllb-endpoints, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: herald-nllb-endpoints}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: system:nodes}
EOT
}

# nllb_start I: `herald nllb` for node I (LAB_NLLB_ARGS: more flags) in its namespace, from the host binary the images phase built; waits for
# the patched kubeconfig, then writes kube-proxy's.
nllb_start() {
	local i=$1 n
	n=$(node_name "$i")
	[ -x "$HERALD_HOST_BIN" ] || die "no herald binary at $HERALD_HOST_BIN (lab images)"
	rm -f "$(nllb_kubelet_kubeconfig "$i")"
	# shellcheck disable=SC2086 # LAB_NLLB_ARGS is a list of flags
	start_daemon "$n-nllb" nsenter --net="/var/run/netns/$n" -- "$HERALD_HOST_BIN" nllb \
		--kubeconfig "$LAB_STATE/kubelet-$n.kubeconfig" --patched-kubeconfig "$(nllb_kubelet_kubeconfig "$i")" \
		--state-file "$(nllb_state_file "$i")" --apiserver-port "$NLLB_PORT" \
		--metrics-bind-address "$(node_ip4 "$i"):$NLLB_METRICS_PORT" --log-level debug ${LAB_NLLB_ARGS:-}
	wait_for "$n NLLB's patched kubeconfig" 30 test -s "$(nllb_kubelet_kubeconfig "$i")"
	nllb_proxy_kubeconfig_write "$i"
}

# nllb_proxy_kubeconfig_write I: kube-proxy's kubeconfig for node I with the server on the node's balancer and the
# original server's address as the TLS server name (what `herald nllb` writes for the kubelet).
nllb_proxy_kubeconfig_write() {
	local i=$1 f
	f=$(nllb_proxy_kubeconfig "$i")
	sed -e "s|server: https://$HOST4:$APISERVER_PORT|server: https://127.0.0.1:$NLLB_PORT\n    tls-server-name: $HOST4|" \
		"$LAB_STATE/kube-proxy.kubeconfig" >"$f.tmp"
	grep -q "tls-server-name: $HOST4" "$f.tmp" || die "patching $LAB_STATE/kube-proxy.kubeconfig for node $i failed"
	mv "$f.tmp" "$f"
}

# cmd_nllb_restart I: `lab nllb-restart I`: stop node I's NLLB (SIGTERM) and start it again.
cmd_nllb_restart() {
	local i=${1:-}
	load_lab_settings
	if ! [[ $i =~ ^[0-9]+$ ]] || [ "$i" -lt 1 ] || [ "$i" -gt "$LAB_NODES" ]; then die "lab nllb-restart: want a node 1..$LAB_NODES"; fi
	[ "$LAB_NLLB" = 1 ] || die "lab nllb-restart: the lab runs without NLLB (LAB_NLLB=1 lab up)"
	stop_daemon "$(node_name "$i")-nllb" 10
	nllb_start "$i"
}
