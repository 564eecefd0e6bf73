# shellcheck shell=bash
# NLLB on the nodes. LAB_NLLB=1: every node runs `herald nllb` as a host service in its namespace (before its
# kubelet), and its kubelet and kube-proxy use the patched kubeconfigs pointing at the node's loopback balancer.

NLLB_PORT=7443
NLLB_METRICS_PORT=7574
# Where the nodes' herald nllb learns the API servers: speaker (the default, as the chart does it: the Herald
# speakers write the default/kubernetes EndpointSlices into NLLB_SHARED_STATE, which herald nllb follows; every node
# of the lab shares the host's filesystem, so the one file serves them all) or watch (herald nllb watches them with
# the node's credentials; the lab grants the RBAC).
LAB_NLLB_FEED=${LAB_NLLB_FEED:-speaker}
NLLB_SHARED_DIR=$LAB_STATE/nllb

check_nllb() {
	case $LAB_NLLB in 0 | 1) ;; *) die "LAB_NLLB=$LAB_NLLB: want 0 or 1" ;; esac
	case $LAB_NLLB_FEED in speaker | watch) ;; *) die "LAB_NLLB_FEED=$LAB_NLLB_FEED: want speaker or watch" ;; esac
}


HERALD_HOST_BIN=$IMAGE_CACHE/bin/herald

nllb_kubelet_kubeconfig() { echo "$(node_dir "$1")/kubelet-nllb.kubeconfig"; }
nllb_proxy_kubeconfig() { echo "$(node_dir "$1")/kube-proxy-nllb.kubeconfig"; }
nllb_state_file() {
	if [ "$LAB_NLLB_FEED" = speaker ]; then echo "$NLLB_SHARED_DIR/nllb-upstreams.json"; else echo "$(node_dir "$1")/nllb-upstreams.json"; fi
}
nllb_feed_flag() { if [ "$LAB_NLLB_FEED" = watch ]; then echo --watch-endpoints; else echo --watch-endpoints=false; fi; }

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
	mkdir -p "$NLLB_SHARED_DIR"
	# shellcheck disable=SC2086 # LAB_NLLB_ARGS is a list of flags
	start_daemon "$n-nllb" nsenter --net="/var/run/netns/$n" -- "$HERALD_HOST_BIN" nllb \
		--kubeconfig "$LAB_STATE/kubelet-$n.kubeconfig" --patched-kubeconfig "$(nllb_kubelet_kubeconfig "$i")" \
		--state-file "$(nllb_state_file "$i")" --apiserver-port "$NLLB_PORT" \
		--metrics-bind-address "$(node_ip4 "$i"):$NLLB_METRICS_PORT" --log-level debug "$(nllb_feed_flag)" ${LAB_NLLB_ARGS:-}
	wait_for "$n NLLB's patched kubeconfig" 30 test -s "$(nllb_kubelet_kubeconfig "$i")"
	nllb_proxy_kubeconfig_write "$i"
}

# nllb_proxy_kubeconfig_write I: kube-proxy's kubeconfig for node I, patched by `herald nllb write-kubeconfig` the way
# the balancer patches the kubelet's (server on the node's balancer, the original server's address as the TLS server
# name).
nllb_proxy_kubeconfig_write() {
	"$HERALD_HOST_BIN" nllb write-kubeconfig --kubeconfig "$LAB_STATE/kube-proxy.kubeconfig" \
		--patched-kubeconfig "$(nllb_proxy_kubeconfig "$1")" --apiserver-port "$NLLB_PORT" --state-file= >/dev/null
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
