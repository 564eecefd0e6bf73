# shellcheck shell=bash
# The Kubernetes cluster: control plane on the host (etcd, apiserver, controller-manager, scheduler), and per
# node namespace its own containerd, kubelet and kube-proxy.

apiserver_ready() { apiserver_ready_at 1; }

controlplane_up() {
	local pki=$LAB_STATE/pki
	mkdir -p "$LAB_STATE/etcd"
	start_daemon etcd "$K8S_BIN/etcd" --name herald-lab --data-dir "$LAB_STATE/etcd" \
		--listen-client-urls "$(etcd_client_urls)" \
		--advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "herald-lab=http://127.0.0.1:$ETCD_PEER_PORT" \
		--unsafe-no-fsync --log-level warn
	wait_for etcd 20 curl -sf "http://127.0.0.1:$ETCD_CLIENT_PORT/health" || return 1

	apiserver_start 1 || return 1
	apiservers_more_up || return 1

	start_daemon kube-controller-manager "$K8S_BIN/kube-controller-manager" \
		--kubeconfig "$LAB_STATE/kube-controller-manager.kubeconfig" \
		--authentication-kubeconfig "$LAB_STATE/kube-controller-manager.kubeconfig" \
		--authorization-kubeconfig "$LAB_STATE/kube-controller-manager.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
		--service-account-private-key-file "$pki/sa.key" --root-ca-file "$pki/ca.crt" \
		--cluster-signing-cert-file "$pki/ca.crt" --cluster-signing-key-file "$pki/ca.key" \
		--service-cluster-ip-range "$(service_cidrs)" --cluster-cidr "$(cluster_cidrs)" --allocate-node-cidrs=false \
		--node-cidr-mask-size-ipv4 24 --node-cidr-mask-size-ipv6 64 \
		--profiling=false --v=1
	start_daemon kube-scheduler "$K8S_BIN/kube-scheduler" \
		--kubeconfig "$LAB_STATE/kube-scheduler.kubeconfig" \
		--authentication-kubeconfig "$LAB_STATE/kube-scheduler.kubeconfig" \
		--authorization-kubeconfig "$LAB_STATE/kube-scheduler.kubeconfig" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false --v=1
}

controlplane_down() {
	stop_daemons 5 kube-scheduler kube-controller-manager
	# Throwaway data: no need for a graceful apiserver shutdown.
	stop_daemons 3 kube-apiserver kube-apiserver-2 kube-apiserver-3 etcd
	cmd_apiserver_etcd restore 1
}

node_containerd_sock() { echo "$(node_dir "$1")/containerd/containerd.sock"; }
node_ctr() { local i=$1; shift; ctr -a "$(node_containerd_sock "$i")" -n k8s.io "$@"; }

containerd_config() {
	local i=$1 d
	d=$(node_dir "$i")
	cat <<EOT
version = 2
root = "$d/containerd/root"
state = "$d/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = "$d/containerd/containerd.sock"
[ttrpc]
  address = "$d/containerd/containerd.sock.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = "$d/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$d/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$d/cni/net.d"
    max_conf_num = 1
EOT
}

# cni_config I: the node's pod network: a bridge with host-local addresses from the node's pod CIDRs (one range
# set per family; the bridge gets the first address of each as the pods' gateway).
cni_config() {
	local i=$1 ranges routes
	ranges="[{\"subnet\": \"$(node_pod_cidr "$i")\"}]"
	routes='{"dst": "0.0.0.0/0"}'
	if lab_ipv6; then
		ranges+=", [{\"subnet\": \"$(node_pod_cidr6 "$i")\"}]"
		routes+=', {"dst": "::/0"}'
	fi
	cat <<EOT
{
  "cniVersion": "1.0.0",
  "name": "${P}pods",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [$ranges],
        "routes": [$routes],
        "dataDir": "$(node_dir "$i")/cni/ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOT
}

kubelet_config() {
	local i=$1 d
	d=$(node_dir "$i")
	cat <<EOT
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $(node_ip4 "$i")
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $LAB_STATE/pki/ca.crt}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
failCgroupV1: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
failSwapOn: false
evictionHard: {}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
containerRuntimeEndpoint: unix://$(node_containerd_sock "$i")
staticPodPath: $d/manifests
podLogsDir: $d/pod-logs
resolvConf: ""
clusterDomain: cluster.local
serializeImagePulls: false
rotateCertificates: false
protectKernelDefaults: false
makeIPTablesUtilChains: true
fileCheckFrequency: 5s
nodeStatusUpdateFrequency: 5s
# The forwarding sysctls of the svclb pods (ServiceLB), allowed as k3s's agents allow them; docs/svclb.md.
allowedUnsafeSysctls: ["net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"]
EOT
}

kube_proxy_config() {
	local i=$1
	cat <<EOT
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: $LAB_KUBE_PROXY_MODE
hostnameOverride: $(node_name "$i")
bindAddress: $(node_ip4 "$i")
clusterCIDR: $(cluster_cidrs)
clientConnection: {kubeconfig: $(if [ "$LAB_NLLB" = 1 ]; then nllb_proxy_kubeconfig "$i"; else echo "$LAB_STATE/kube-proxy.kubeconfig"; fi)}
healthzBindAddress: $(node_ip4 "$i"):10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
EOT
}

# Values the kubelet wants in global sysctls; bind-mounted over /proc/sys in its own mount namespace so that it
# never changes the host.
KUBELET_SYSCTLS="vm/overcommit_memory=1 vm/panic_on_oom=0 kernel/panic=10 kernel/panic_on_oops=1
kernel/keys/root_maxkeys=1000000 kernel/keys/root_maxbytes=25000000"

# The kubelet's fixed paths must exist on the host as mount points for its private bind mounts. The lab creates
# those that are missing and records them, so that `lab down` removes them again (if still empty).
HOST_KUBELET_DIRS="/var/lib/kubelet /var/log/containers"
host_dirs_for_kubelet() {
	local dir
	for dir in $HOST_KUBELET_DIRS; do
		if [ ! -d "$dir" ]; then
			mkdir -p "$dir"
			echo "$dir" >>"$LAB_STATE/created-dirs"
		fi
	done
}

node_up() {
	local i=$1 n d s script
	n=$(node_name "$i")
	d=$(node_dir "$i")
	mkdir -p "$d/containerd" "$d/cni/net.d" "$d/manifests" "$d/pod-logs" "$d/kubelet" "$d/sysctl"
	containerd_config "$i" >"$d/containerd.toml"
	cni_config "$i" >"$d/cni/net.d/10-${P}pods.conflist"
	kubelet_config "$i" >"$d/kubelet.yaml"
	kube_proxy_config "$i" >"$d/kube-proxy.yaml"

	# containerd joins only the node's network namespace (ip netns exec would remount /sys and hide the
	# cgroup mounts from runc).
	start_daemon "$n-containerd" nsenter --net="/var/run/netns/$n" -- containerd --config "$d/containerd.toml"

	# The kubelet root dir is a shared mount, so that the volumes the kubelet mounts (in its own mount
	# namespace) are seen by containerd and runc.
	mountpoint -q "$d/kubelet" || mount --bind "$d/kubelet" "$d/kubelet"
	mount --make-rshared "$d/kubelet"
	# The kubelet runs in its own mount namespace where files holding the wanted values cover those sysctls,
	# and per-node directories cover the paths it uses regardless of --root-dir (device plugin socket, log
	# symlinks).
	local f
	host_dirs_for_kubelet
	mkdir -p "$d/var-lib-kubelet" "$d/var-log-containers"
	script="mount --make-rprivate /proc && mount --bind $d/var-lib-kubelet /var/lib/kubelet"
	script+=" && mount --bind $d/var-log-containers /var/log/containers"
	for s in $KUBELET_SYSCTLS; do
		f=$d/sysctl/$(echo "${s%%=*}" | tr / _)
		echo "${s#*=}" >"$f"
		script+=" && mount --bind $f /proc/sys/${s%%=*}"
	done
	local kc=$LAB_STATE/kubelet-$n.kubeconfig
	if [ "$LAB_NLLB" = 1 ]; then
		nllb_start "$i" || return 1
		kc=$(nllb_kubelet_kubeconfig "$i")
	fi
	script+=" && exec $K8S_BIN/kubelet --config=$d/kubelet.yaml --kubeconfig=$kc"
	script+=" --root-dir=$d/kubelet --cert-dir=$d/kubelet/pki --hostname-override=$n --node-ip=$(node_ips "$i") --v=1"
	# LAB_EXTERNAL_CLOUD_NODES: these nodes register as a cluster with an external cloud provider has them:
	# tainted node.cloudprovider.kubernetes.io/uninitialized until a cloud-controller-manager initializes them.
	if external_cloud_node "$i"; then script+=" --cloud-provider=external"; fi
	wait_for "$n containerd" 30 test -S "$(node_containerd_sock "$i")" || return 1
	images_import "$i" || return 1
	start_daemon "$n-kubelet" nsenter --net="/var/run/netns/$n" -- \
		unshare -m --propagation unchanged -- sh -c "$script"
	start_daemon "$n-kube-proxy" ip netns exec "$n" "$K8S_BIN/kube-proxy" --config="$d/kube-proxy.yaml" --v=1
}

# node_down I: stop kubelet and kube-proxy, kill and delete every container through containerd (so that the
# shims, runc state and pod network namespaces go away), stop containerd, then remove what may be left.
node_down() {
	local i=$1 n d id
	n=$(node_name "$i")
	d=$(node_dir "$i")
	stop_daemons 10 "$n-kubelet" "$n-kube-proxy" "$n-standin-bgp" "$n-nllb"
	if pid_alive "$n-containerd" && [ -S "$(node_containerd_sock "$i")" ]; then
		for id in $(node_ctr "$i" tasks ls -q 2>/dev/null); do
			node_ctr "$i" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
		done
		for id in $(node_ctr "$i" tasks ls -q 2>/dev/null); do
			node_ctr "$i" tasks delete -f "$id" >/dev/null 2>&1 || true
		done
	fi
	stop_daemon "$n-containerd" 10
}
