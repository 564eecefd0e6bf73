# shellcheck shell=bash
# Certificates for the lab's control plane, made with openssl: a CA, the apiserver serving cert, one client cert
# per identity (admin, each kubelet, kube-proxy, controller-manager, scheduler) and the service-account key pair.

# client_cert NAME CN [O]
client_cert() {
	local d=$LAB_STATE/pki name=$1 cn=$2 o=${3:-} subj
	subj="/CN=$cn"
	[ -z "$o" ] || subj="/O=$o$subj"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/$name.key" 2>/dev/null
	openssl req -new -key "$d/$name.key" -subj "$subj" -out "$d/$name.csr" 2>/dev/null
	printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n' \
		>"$d/$name.ext"
	openssl x509 -req -in "$d/$name.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 30 \
		-extfile "$d/$name.ext" -out "$d/$name.crt" 2>/dev/null
	rm -f "$d/$name.csr" "$d/$name.ext"
}

# kubeconfig FILE CERTNAME: a kubeconfig for the lab apiserver using pki/CERTNAME.{crt,key}.
kubeconfig() {
	local f=$1 c=$LAB_STATE/pki/$2
	cat >"$f" <<EOT
apiVersion: v1
kind: Config
clusters:
- name: herald-lab
  cluster:
    server: https://$HOST4:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 <"$LAB_STATE/pki/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 <"$c.crt")
    client-key-data: $(base64 -w0 <"$c.key")
contexts:
- name: herald-lab
  context:
    cluster: herald-lab
    user: $2
current-context: herald-lab
EOT
	chmod 600 "$f"
}

pki_up() {
	local d=$LAB_STATE/pki i
	mkdir -p "$d"
	openssl ecparam -name prime256v1 -genkey -noout -out "$d/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$d/ca.key" -subj "/CN=herald-lab-ca" -days 30 -out "$d/ca.crt" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null

	openssl ecparam -name prime256v1 -genkey -noout -out "$d/apiserver.key" 2>/dev/null
	openssl req -new -key "$d/apiserver.key" -subj "/CN=kube-apiserver" -out "$d/apiserver.csr" 2>/dev/null
	cat >"$d/apiserver.ext" <<EOT
basicConstraints=CA:FALSE
keyUsage=critical,digitalSignature,keyEncipherment
extendedKeyUsage=serverAuth
subjectAltName=DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:127.0.0.1,IP:10.96.0.1,IP:$HOST4,IP:$HOST6,IP:$(apiserver_ip4 2),IP:$(apiserver_ip4 3)
EOT
	openssl x509 -req -in "$d/apiserver.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 30 \
		-extfile "$d/apiserver.ext" -out "$d/apiserver.crt" 2>/dev/null
	rm -f "$d/apiserver.csr" "$d/apiserver.ext"

	openssl genrsa -out "$d/sa.key" 2048 2>/dev/null
	openssl rsa -in "$d/sa.key" -pubout -out "$d/sa.pub" 2>/dev/null

	client_cert admin admin system:masters
	client_cert kube-proxy system:kube-proxy
	client_cert kube-controller-manager system:kube-controller-manager
	client_cert kube-scheduler system:kube-scheduler
	for ((i = 1; i <= LAB_NODES; i++)); do
		client_cert "kubelet-$(node_name "$i")" "system:node:$(node_name "$i")" system:nodes
	done

	kubeconfig "$LAB_STATE/admin.kubeconfig" admin
	kubeconfig "$LAB_STATE/kube-proxy.kubeconfig" kube-proxy
	kubeconfig "$LAB_STATE/kube-controller-manager.kubeconfig" kube-controller-manager
	kubeconfig "$LAB_STATE/kube-scheduler.kubeconfig" kube-scheduler
	for ((i = 1; i <= LAB_NODES; i++)); do
		kubeconfig "$LAB_STATE/kubelet-$(node_name "$i").kubeconfig" "kubelet-$(node_name "$i")"
	done
}
