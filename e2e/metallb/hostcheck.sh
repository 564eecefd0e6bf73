#!/usr/bin/env bash
# Runs the cached MetalLB v0.16.2 controller and speaker (make metallb-bin) as plain host processes — no kubelet, no
# container, no Pod of their own — against a private etcd + kube-apiserver, all inside a network namespace of their
# own that holds only loopback and a veth pair (nothing reaches or answers on the host's interfaces).
# Checks what README.md says about running them outside a Pod:
#
#   - the objects they need: MetalLB's CRDs and RBAC (from metallb-native.yaml, without the webhooks), a Pod object
#     for each process to Get at start-up (placeholders: nothing runs them), a Node for the speaker;
#   - the controller, as the controller ServiceAccount, creates the memberlist Secret and assigns a pool address to
#     a LoadBalancer Service;
#   - the speaker, as the speaker ServiceAccount, with the env its DaemonSet sets, starts memberlist with that
#     Secret, finds its placeholder Pod by METALLB_ML_LABELS, reports a Valid ConfigurationState and announces the
#     address in layer 2 mode (ServiceL2Status) once the Service has a ready endpoint on its node.
#
# Needs root (a network namespace), Kubernetes and etcd from `make kube-bin`. Takes ~30 s. HOSTCHECK_KEEP=1 keeps
# the state directory (logs, kubeconfigs). Exit status 0 when every check passed.
set -euo pipefail

cache=${HERALD_CACHE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/herald}
mlb=$cache/metallb-v0.16.2
k8s_bin=$cache/k8s-v1.37.2/bin
etcd_bin=$cache/etcd-v3.6.16/bin/etcd

say() { printf '[hostcheck %3ss] %s\n' "$SECONDS" "$*" >&2; }
die() {
	say "FAIL: $*"
	exit 1
}

if [ "${HOSTCHECK_IN_NETNS:-}" != 1 ]; then
	[ "$(id -u)" = 0 ] || die "needs root (a network namespace of its own)"
	for f in "$mlb/controller" "$mlb/speaker"; do
		[ -x "$f" ] || die "no $f: run make metallb-bin"
	done
	for f in "$k8s_bin/kube-apiserver" "$k8s_bin/kubectl" "$etcd_bin"; do
		[ -x "$f" ] || die "no $f: run make kube-bin"
	done
	# Everything below runs in a new network namespace; it ends with this script.
	exec env HOSTCHECK_IN_NETNS=1 unshare --net --fork -- "$0" "$@"
fi

state=$(mktemp -d "${TMPDIR:-/tmp}/herald-metallb-hostcheck.XXXXXX")
pids=() # started here, stopped in reverse order
stop_all() {
	local i pid
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		pid=${pids[i]}
		kill "$pid" 2>/dev/null || continue
		for _ in $(seq 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
		kill -9 "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	if [ "${HOSTCHECK_KEEP:-}" = 1 ]; then say "state kept: $state"; else rm -rf "$state"; fi
}
trap stop_all EXIT
start() { # start NAME CMD...: run CMD in the background, output in $state/NAME.log
	local name=$1
	shift
	"$@" >"$state/$name.log" 2>&1 &
	pids+=($!)
}
# until_ok SECONDS WHAT CMD...: retry CMD every half second until it succeeds.
until_ok() {
	local t=$1 what=$2 i
	shift 2
	for ((i = 0; i < t * 2; i++)); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 0.5
	done
	die "$what (not within ${t}s; logs in $state, HOSTCHECK_KEEP=1 keeps them)"
}
kubectl() { "$k8s_bin/kubectl" --kubeconfig "$state/admin.kubeconfig" "$@"; }

ip link set lo up
ip link add hc0 type veth peer name hc1 # (this kernel has no dummy interfaces)
ip addr add 192.0.2.10/24 dev hc0
ip link set hc0 up
ip addr add 192.0.2.11/24 dev hc1 # the asking side of the ARP check
ip link set hc1 up

# ---- a private control plane: etcd and kube-apiserver (token auth, RBAC) on loopback
cd "$state"
openssl genrsa -out sa.key 2048 2>/dev/null
openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
echo "hostcheck-token,admin,admin,system:masters" >tokens.csv
start etcd "$etcd_bin" --data-dir "$state/etcd" --listen-client-urls http://127.0.0.1:2379 \
	--advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 --unsafe-no-fsync
start apiserver "$k8s_bin/kube-apiserver" --etcd-servers http://127.0.0.1:2379 --secure-port 6443 \
	--bind-address 127.0.0.1 --advertise-address 192.0.2.10 --cert-dir "$state/certs" --token-auth-file tokens.csv \
	--service-account-issuer https://kubernetes.default.svc --service-account-key-file sa.pub \
	--service-account-signing-key-file sa.key --service-cluster-ip-range 10.97.0.0/16 --authorization-mode Node,RBAC
# kubeconfig USER: admin, or (impersonated) the ServiceAccount USER — so MetalLB runs with its own RBAC.
kubeconfig() {
	cat <<EOF
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: hostcheck-token${1:+, as: "$1"}}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
EOF
}
kubeconfig "" >admin.kubeconfig
kubeconfig system:serviceaccount:metallb-system:controller >controller.kubeconfig
kubeconfig system:serviceaccount:metallb-system:speaker >speaker.kubeconfig
until_ok 60 "kube-apiserver ready" kubectl get --raw /readyz
say "control plane ready"

# ---- MetalLB's CRDs and the rest of its native manifest, without the webhooks (nothing serves them here) and
# without the bgppeers conversion webhook (crds/ holds the plain CRDs). The Deployment and DaemonSet are created
# but, with no kube-controller-manager, never make Pods.
kubectl apply --server-side -f "$mlb/crds/" >/dev/null
kubectl wait --for condition=Established crd --all --timeout 30s >/dev/null
awk 'BEGIN { RS = "\n---\n"; ORS = "\n---\n" } !/\nkind: (CustomResourceDefinition|ValidatingWebhookConfiguration)\n/' \
	"$mlb/metallb-native.yaml" >native-rest.yaml
kubectl apply -f native-rest.yaml >/dev/null
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: v1
kind: Node
metadata: {name: node1, labels: {kubernetes.io/os: linux, kubernetes.io/hostname: node1}}
---
# Placeholders: MetalLB Gets its own Pod at start-up (owner of its ConfigurationState and status objects), and the
# speakers find each other's memberlist address in the status.podIP of the Pods METALLB_ML_LABELS selects.
apiVersion: v1
kind: Pod
metadata: {name: controller-host, namespace: metallb-system, labels: {app: metallb, component: controller}}
spec: {serviceAccountName: controller, automountServiceAccountToken: false, containers: [{name: controller, image: none}]}
---
apiVersion: v1
kind: Pod
metadata: {name: speaker-node1, namespace: metallb-system, labels: {app: metallb, component: speaker}}
spec:
  serviceAccountName: speaker
  automountServiceAccountToken: false
  nodeName: node1
  hostNetwork: true
  containers: [{name: speaker, image: none}]
EOF
kubectl -n metallb-system patch pod speaker-node1 --subresource status --type merge \
	-p '{"status":{"podIP":"192.0.2.10","podIPs":[{"ip":"192.0.2.10"}],"hostIP":"192.0.2.10"}}' >/dev/null
kubectl apply -f - >/dev/null <<'EOF'
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: hostcheck, namespace: metallb-system}
spec: {addresses: [192.0.2.64/28]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: hostcheck, namespace: metallb-system}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec: {type: LoadBalancer, ports: [{port: 80}], selector: {app: web}}
---
# A ready endpoint on node1 (no kube-controller-manager here writes EndpointSlices).
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: web-hostcheck, namespace: default, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{port: 80, protocol: TCP}]
endpoints: [{addresses: [10.244.1.5], nodeName: node1, conditions: {ready: true}}]
EOF
say "MetalLB objects, placeholders and a LoadBalancer Service created"

# ---- the controller: flags and env of its Deployment, webhooks off, metrics off
start controller env METALLB_POD_NAME=controller-host METALLB_NAMESPACE=metallb-system METALLB_ML_SECRET_NAME=memberlist \
	METALLB_DEPLOYMENT=controller "$mlb/controller" --kubeconfig "$state/controller.kubeconfig" --port 0 \
	--webhook-mode disabled --health-probe-port 17473 --log-level info # 17472: the speaker's, in this one netns
svc_ip() { kubectl -n default get svc web -o jsonpath='{.status.loadBalancer.ingress[0].ip}' | grep -q .; }
until_ok 60 "controller assigns an address to default/web" svc_ip
until_ok 30 "controller creates the memberlist Secret" kubectl -n metallb-system get secret memberlist
say "controller: default/web got $(kubectl -n default get svc web -o jsonpath='{.status.loadBalancer.ingress[0].ip}'); Secret memberlist created"

# ---- the speaker: the env its DaemonSet sets; the memberlist key as the Secret volume would hold it
mkdir -p ml-secret
kubectl -n metallb-system get secret memberlist -o jsonpath='{.data.secretkey}' | base64 -d >ml-secret/secretkey
start speaker env METALLB_NODE_NAME=node1 METALLB_POD_NAME=speaker-node1 METALLB_NAMESPACE=metallb-system \
	METALLB_ML_BIND_ADDR=192.0.2.10 METALLB_ML_LABELS=app=metallb,component=speaker \
	METALLB_ML_SECRET_KEY_PATH="$state/ml-secret" METALLB_BGP_TYPE=native \
	"$mlb/speaker" --kubeconfig "$state/speaker.kubeconfig" --port 0 --log-level info
config_valid() {
	[ "$(kubectl -n metallb-system get configurationstate "speaker-node1" -o jsonpath='{.status.result}')" = Valid ]
}
until_ok 60 "speaker reports a Valid ConfigurationState" config_valid
l2_status() { kubectl -n metallb-system get servicel2statuses -o jsonpath='{.items[*].status.node}' | grep -qx node1; }
until_ok 60 "speaker announces default/web in layer 2 (ServiceL2Status on node1)" l2_status
grep -q '"msg":"service has IP, announcing"' speaker.log || die "the speaker's log does not say it announces"
grep -q '"node event":"NodeJoin"' speaker.log || die "the speaker did not join memberlist"
until_ok 20 "speaker /readyz (127.0.0.1:17472)" curl -fsS http://127.0.0.1:17472/readyz
if command -v arping >/dev/null; then
	# Out of hc1, into hc0: only the speaker's responder knows 192.0.2.64 (the kernel answers for its own addresses).
	lb=$(kubectl -n default get svc web -o jsonpath='{.status.loadBalancer.ingress[0].ip}')
	arping -c 3 -w 5 -I hc1 "$lb" >arping.log 2>&1 || die "no ARP answer for $lb ($state/arping.log)"
	hc0_mac=$(ip -o link show hc0 | sed -n 's/.*link\/ether \([0-9a-f:]*\) .*/\1/p')
	grep -qi "from $hc0_mac " arping.log || die "the ARP answer is not hc0's MAC address"
	say "ARP: $(grep -m1 -i 'bytes from' arping.log)"
else
	say "no arping (Debian package arping): ARP answer not checked"
fi
for p in "${pids[@]}"; do kill -0 "$p" || die "a process ended early (logs in $state)"; done
say "speaker: memberlist joined, ConfigurationState Valid, default/web announced in layer 2 from node1"
say "OK: controller and speaker run outside a Pod with MetalLB's RBAC"
