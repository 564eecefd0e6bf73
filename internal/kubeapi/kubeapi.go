// Package kubeapi starts a real etcd and kube-apiserver on loopback for
// integration tests: no fakes, the same binaries the lab runs. The binaries
// come from the lab's cache (built by `e2e/lab/lab install`); the directory
// is $HERALD_KUBE_BIN, or $HERALD_CACHE/k8s-v1.37.2/bin.
package kubeapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// KubeVersion is the Kubernetes release the lab builds.
const KubeVersion = "v1.37.2"

// HelmVersion is the helm the lab builds (e2e/lab/lib/common.sh HELM_VERSION).
const HelmVersion = "v3.22.0"

// HelmPath is $HERALD_HELM, or the lab's cached helm (e2e/lab/install.sh helm builds it).
func HelmPath() string {
	if p := os.Getenv("HERALD_HELM"); p != "" {
		return p
	}
	return filepath.Join(CacheDir(), "helm-"+HelmVersion, "bin", "helm")
}

// BinDir is where kube-apiserver and etcd are looked for.
func BinDir() string {
	if d := os.Getenv("HERALD_KUBE_BIN"); d != "" {
		return d
	}
	return filepath.Join(CacheDir(), "k8s-"+KubeVersion, "bin")
}

// CacheDir is where the project caches built tools and binaries: $HERALD_CACHE, or herald under the user's cache
// directory ($XDG_CACHE_HOME, default ~/.cache), as the lab's scripts have it.
func CacheDir() string {
	if c := os.Getenv("HERALD_CACHE"); c != "" {
		return c
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "herald")
}

// Server is a running etcd + kube-apiserver pair.
type Server struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Dir holds certificates, data and logs.
	Dir   string
	procs []*exec.Cmd
}

// Start starts etcd and kube-apiserver on free loopback ports under dir and
// waits until the API server is ready. Call Stop when done, also on failure.
func Start(dir string) (*Server, error) { return StartWith(dir) }

// StartWith is Start with more kube-apiserver flags (e.g.
// --enable-aggregator-routing=true: webhooks and aggregated APIs reached at
// their Services' endpoints, not their ClusterIPs).
func StartWith(dir string, apiserverArgs ...string) (*Server, error) {
	bin := BinDir()
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			return nil, fmt.Errorf("%s not found in %s (build it with `e2e/lab/lab install k8s etcd`, or set HERALD_KUBE_BIN): %w", b, bin, err)
		}
	}
	s := &Server{Dir: dir}
	pki, err := writePKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(3)
	if err != nil {
		return nil, err
	}
	etcdURL := "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peerURL := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	if err := s.spawn(filepath.Join(bin, "etcd"), "etcd",
		"--name=herald-test", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		"--listen-peer-urls="+peerURL, "--initial-advertise-peer-urls="+peerURL,
		"--initial-cluster=herald-test="+peerURL, "--unsafe-no-fsync", "--log-level=warn",
	); err != nil {
		return nil, err
	}
	apiPort := ports[2]
	if err := s.spawn(filepath.Join(bin, "kube-apiserver"), "kube-apiserver", append([]string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(apiPort),
		"--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
		"--tls-cert-file=" + pki.serverCert, "--tls-private-key-file=" + pki.serverKey,
		"--client-ca-file=" + pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + pki.saKey, "--service-account-signing-key-file=" + pki.saKey,
		"--service-cluster-ip-range=10.96.0.0/16,fd00:10:96::/112",
		"--authorization-mode=Node,RBAC",
		"--cert-dir=" + filepath.Join(dir, "apiserver-certs"),
	}, apiserverArgs...)...); err != nil {
		s.Stop()
		return nil, err
	}
	s.Config = &rest.Config{
		Host:            "https://127.0.0.1:" + strconv.Itoa(apiPort),
		TLSClientConfig: rest.TLSClientConfig{CAFile: pki.caCert, CertFile: pki.adminCert, KeyFile: pki.adminKey},
		QPS:             500, Burst: 1000,
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) spawn(path, name string, args ...string) error {
	logf, err := os.Create(filepath.Join(s.Dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Own process group, and die with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// PIDs are the process IDs of the server's processes (etcd, kube-apiserver), for a benchmark that measures what
// they spend.
func (s *Server) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range s.procs {
		out[filepath.Base(p.Path)] = p.Process.Pid
	}
	return out
}

// Stop stops the processes (newest first) and waits for them.
func (s *Server) Stop() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	s.procs = nil
}

func (s *Server) waitReady(timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last error
	for time.Now().Before(deadline) {
		for _, p := range s.procs {
			if p.ProcessState != nil {
				return fmt.Errorf("%s exited; see %s", p.Path, s.Dir)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("kube-apiserver not ready after %s (last error: %v); logs in %s", timeout, last, s.Dir)
}

// InstallCRDs creates every CRD manifest in dir and waits until they are
// established.
func (s *Server) InstallCRDs(dir string) error {
	cs, err := apiextclient.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return fmt.Errorf("no CRD manifests in %s (%v)", dir, err)
	}
	ctx := context.Background()
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var crd apiextv1.CustomResourceDefinition
		if err := yaml.Unmarshal(data, &crd); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
		names = append(names, crd.Name)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range names {
		for {
			crd, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, n, metav1.GetOptions{})
			if err == nil && established(crd) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established: %v", n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func established(crd *apiextv1.CustomResourceDefinition) bool {
	for _, c := range crd.Status.Conditions {
		if c.Type == apiextv1.Established && c.Status == apiextv1.ConditionTrue {
			return true
		}
	}
	return false
}

func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var out []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

type pkiFiles struct {
	caCert, serverCert, serverKey, adminCert, adminKey, saKey string
}

// writePKI makes a CA, a serving certificate for 127.0.0.1, an admin client
// certificate (system:masters) and a service-account signing key.
func writePKI(dir string) (*pkiFiles, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "herald-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, _ := x509.ParseCertificate(caDER)
	f := &pkiFiles{
		caCert: filepath.Join(dir, "ca.crt"), serverCert: filepath.Join(dir, "server.crt"), serverKey: filepath.Join(dir, "server.key"),
		adminCert: filepath.Join(dir, "admin.crt"), adminKey: filepath.Join(dir, "admin.key"), saKey: filepath.Join(dir, "sa.key"),
	}
	if err := writePEM(f.caCert, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	leaf := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, ips []net.IP, dns []string, certPath, keyPath string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: subject, NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, DNSNames: dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			return err
		}
		if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyPath, "EC PRIVATE KEY", kder)
	}
	if err := leaf(2, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP("10.96.0.1")}, []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		f.serverCert, f.serverKey); err != nil {
		return nil, err
	}
	if err := leaf(3, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}}, x509.ExtKeyUsageClientAuth,
		nil, nil, f.adminCert, f.adminKey); err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if err := writePEM(f.saKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return nil, err
	}
	return f, nil
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}

// RunTests starts an etcd and kube-apiserver in a new temporary directory named after prefix, installs the CRDs
// in crdDir, sets *srv, runs the package's tests, stops the server and returns the exit code for TestMain. The
// server's logs are kept (and their directory printed) when a test failed.
func RunTests(m *testing.M, prefix, crdDir string, srv **Server) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := Start(dir)
	if err == nil {
		err = s.InstallCRDs(crdDir)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "integration: cannot start the API server:", err)
		if s != nil {
			s.Stop()
		}
		return 1
	}
	*srv = s
	code := m.Run()
	s.Stop()
	if code == 0 {
		os.RemoveAll(dir)
	} else {
		fmt.Fprintln(os.Stderr, "API server logs kept in", dir)
	}
	return code
}

// WriteBypassingSchema writes an object that the CRD's schema would refuse,
// as an object stored under an older or looser schema stays stored after an
// upgrade: the CRD named crd (e.g. bgppeers.herald.dev) is given a spec that
// admits anything, write(false) is retried until the server takes it, the
// CRD's schema is put back, and write(true) is retried until the server
// refuses it again (the strict schema serves). write(true) must be a dry-run
// create of another object with the same spec: the server lets an update
// keep invalid fields it does not change. The schema is put back also when
// the write fails.
func (s *Server) WriteBypassingSchema(ctx context.Context, crd string, write func(dryRun bool) error) error {
	cs, err := apiextclient.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	crds := cs.ApiextensionsV1().CustomResourceDefinitions()
	orig, err := crds.Get(ctx, crd, metav1.GetOptions{})
	if err != nil {
		return err
	}
	setSpec := func(spec apiextv1.JSONSchemaProps) error {
		for {
			cur, err := crds.Get(ctx, crd, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for i := range cur.Spec.Versions {
				cur.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
			}
			if _, err = crds.Update(ctx, cur, metav1.UpdateOptions{}); err == nil || !apierrors.IsConflict(err) {
				return err
			}
		}
	}
	loose := apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptrTo(true)}
	if err := setSpec(loose); err != nil {
		return fmt.Errorf("loosening %s: %w", crd, err)
	}
	var writeErr error
	deadline := time.Now().Add(30 * time.Second)
	for {
		if writeErr = write(false); writeErr == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := setSpec(orig.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]); err != nil {
		return fmt.Errorf("restoring %s: %w", crd, err)
	}
	if writeErr != nil {
		return fmt.Errorf("writing past the schema of %s: %w", crd, writeErr)
	}
	for deadline = time.Now().Add(30 * time.Second); ; {
		err := write(true)
		if apierrors.IsInvalid(err) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the strict schema of %s is not back after 30s (a dry run of the write: %v)", crd, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ptrTo[T any](v T) *T { return &v }

// WriteSpecBypassingSchema sets the spec of a custom resource (creating it
// when it is missing) to spec, past the schema of its CRD (named
// <resource>.<group>): WriteBypassingSchema with the dry run a create of
// another object with the same spec.
func (s *Server) WriteSpecBypassingSchema(ctx context.Context, gvr schema.GroupVersionResource, kind, namespace, name string, spec map[string]any) error {
	dc, err := dynamic.NewForConfig(s.Config)
	if err != nil {
		return err
	}
	res := dc.Resource(gvr).Namespace(namespace)
	// The spec as JSON values (int64, float64, string, ...): what
	// unstructured objects hold.
	raw, err := json.Marshal(spec)
	if err != nil {
		return err
	}
	var jsonSpec map[string]any
	if err := utiljson.Unmarshal(raw, &jsonSpec); err != nil {
		return err
	}
	object := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": runtime.DeepCopyJSONValue(jsonSpec)}}
		u.SetAPIVersion(gvr.GroupVersion().String())
		u.SetKind(kind)
		u.SetNamespace(namespace)
		u.SetName(name)
		return u
	}
	write := func(dryRun bool) error {
		if dryRun {
			// An update of the object would pass: the server lets an
			// update keep invalid fields it does not change.
			_, err := res.Create(ctx, object(name+"-probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err
		}
		cur, err := res.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = res.Create(ctx, object(name), metav1.CreateOptions{})
			return err
		}
		if err != nil {
			return err
		}
		cur.Object["spec"] = runtime.DeepCopyJSONValue(jsonSpec)
		_, err = res.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}
	return s.WriteBypassingSchema(ctx, gvr.Resource+"."+gvr.Group, write)
}
