# shellcheck shell=bash
# Several kube-apiservers on the one etcd (for the NLLB suite).
#
# LAB_APISERVERS=N (1-3, default 1): server I listens on apiserver_ip4 I (server 1 on HOST4, the address every
# kubeconfig names: the nodes' seed) and reaches etcd on 127.0.0.I, so that one server alone can be cut from etcd
# (`lab apiserver-etcd I cut`: its /readyz fails, it still accepts TCP).

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
	v=$(sed -n 's/^LAB_NLLB_FEED=//p' "$LAB_STATE/lab.env")
	# shellcheck disable=SC2034 # used by nllb.sh
	if [ -n "$v" ]; then LAB_NLLB_FEED=$v; fi
}
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
}

apiserver_ready_at() {
	curl -sf --max-time 2 --cacert "$LAB_STATE/pki/ca.crt" --cert "$LAB_STATE/pki/admin.crt" \
		--key "$LAB_STATE/pki/admin.key" "https://$(apiserver_ip4 "$1"):$APISERVER_PORT/readyz" >/dev/null
}

# apiserver_start I: start API server I (its address is added to the host's lan interface first). With
# --enable-aggregator-routing the server calls admission webhooks (Herald's) at their Service's endpoints, the pod
# addresses the host routes into the lab, rather than at the ClusterIP, which only the nodes' kube-proxy serves.
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
		--allow-privileged=true --profiling=false --v=1 \
		--enable-aggregator-routing=true
	wait_for "kube-apiserver $i /readyz" 90 apiserver_ready_at "$i"
}

# apiservers_more_up: servers 2..N (server 1 is started by controlplane_up).
apiservers_more_up() {
	local i
	for ((i = 2; i <= LAB_APISERVERS; i++)); do apiserver_start "$i"; done
}

# cmd_apiserver stop|kill|start I: `lab apiserver`: SIGTERM (stop), SIGKILL (kill) or start API server I (if it is
# not running).
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
		# Idempotent: a test's cleanup starts a server it may have started again already.
		if pid_alive "$(apiserver_daemon "$i")"; then
			log "kube-apiserver $i already runs"
			return 0
		fi
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

