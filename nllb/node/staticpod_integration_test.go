//go:build integration

package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/herald-lb/herald/internal/gobuild"
	"github.com/herald-lb/herald/internal/logbuf"
	"github.com/herald-lb/herald/nllb"
)

// TestStaticPodAcceptedByAPIServer: the printed manifest (YAML, as
// `herald nllb static-pod` writes it) is accepted by a server-side dry run
// with strict field validation in kube-system — what the kubelet's mirror
// pod goes through (the priority class and the priority must agree, the
// host paths and probes must validate, the service account admission
// must accept it as a mirror pod) — for several flag sets.
func TestStaticPodAcceptedByAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	kc := writeKubelet(t, root)
	for _, tc := range []struct {
		name string
		edit func(*Options)
		sp   StaticPodOptions
	}{
		{name: "defaults", edit: func(o *Options) {}},
		{name: "metrics, probe, patched copy", edit: func(o *Options) {
			o.MetricsAddr = "127.0.0.1:7574"
			o.KubeconfigOut = filepath.Join(root, "var/lib/herald/kubelet-nllb.conf")
		}, sp: StaticPodOptions{LogLevel: "debug", ImagePullPolicy: corev1.PullNever}},
		{name: "konnectivity, IPv6, extra paths, own name", edit: func(o *Options) {
			o.Konnectivity, o.Loopback, o.MetricsAddr = true, LoopbackIPv6, "[::1]:7574"
			o.WatchEndpoints, o.StateFilePoll = true, 0
		}, sp: StaticPodOptions{Name: "nllb", HostPaths: []string{"/var/lib/kubelet/pki", "/etc/ssl/certs"}}},
	} {
		o := DefaultOptions()
		o.KubeconfigIn = kc
		tc.edit(&o)
		tc.sp.Image = "localhost/herald:dev"
		pod, err := StaticPod(o, tc.sp)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		manifest, err := yaml.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		body, err := yaml.YAMLToJSON(manifest)
		if err != nil {
			t.Fatal(err)
		}
		// What the kubelet sends for a static pod: its mirror pod, marked by
		// the mirror annotation and bound to the node (the service account
		// admission then leaves it alone, and refuses it if it named a
		// service account or mounted a token).
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatal(err)
		}
		meta := obj["metadata"].(map[string]any)
		meta["name"] = meta["name"].(string) + "-n1"
		meta["annotations"] = map[string]any{corev1.MirrorPodAnnotationKey: "test", "kubernetes.io/config.source": "file"}
		obj["spec"].(map[string]any)["nodeName"] = "n1"
		if body, err = json.Marshal(obj); err != nil {
			t.Fatal(err)
		}
		res := admin.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").
			Param("dryRun", "All").Param("fieldValidation", "Strict").Body(body).Do(ctx)
		if err := res.Error(); err != nil {
			t.Fatalf("%s: the API server refuses the manifest: %v\n%s", tc.name, err, manifest)
		}
		raw, _ := res.Raw()
		var got corev1.Pod
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.PriorityClassName != "system-node-critical" || got.Spec.Priority == nil || *got.Spec.Priority != 2000001000 ||
			len(got.Spec.Volumes) != len(pod.Spec.Volumes) {
			t.Errorf("%s: stored as %+v", tc.name, got.Spec)
		}
	}
}

// TestStaticPodArgsRun runs what the static pod runs, minus the kubelet: the
// herald binary (built here) with the manifest's container args, against
// the real API server, as the node identity. It serves /healthz where the
// liveness probe looks, writes the patched kubeconfig through which a
// request reaches the API server, and follows a new set written into its
// upstream file (as the speaker's feed would).
func TestStaticPodArgsRun(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "herald")
	build := gobuild.Command(ctx, bin, "../../cmd/herald")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	seed := netip.MustParseAddrPort(strings.TrimPrefix(srv.Config.Host, "https://"))
	in := filepath.Join(dir, "etc", "kubelet.conf")
	if err := os.MkdirAll(filepath.Dir(in), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	// A name the API server's certificate carries (a loopback server is
	// refused as an already patched kubeconfig) and that the system
	// resolver does not know here — the DNS-down-at-boot case: the binary
	// starts from --upstreams (the API server's address) and the persisted
	// file, and the clients verify the certificate against the name.
	cfg.Clusters["k"] = &clientcmdapi.Cluster{Server: fmt.Sprintf("https://kubernetes:%d", seed.Port()), CertificateAuthority: srv.Config.CAFile}
	cfg.AuthInfos["node"] = &clientcmdapi.AuthInfo{ClientCertificate: srv.Config.CertFile, ClientKey: srv.Config.KeyFile,
		Impersonate: "system:node:n1", ImpersonateGroups: []string{"system:nodes"}}
	cfg.Contexts["node"] = &clientcmdapi.Context{Cluster: "k", AuthInfo: "node"}
	cfg.CurrentContext = "node"
	if err := clientcmd.WriteToFile(*cfg, in); err != nil {
		t.Fatal(err)
	}
	ports := make([]int, 2)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	o := DefaultOptions()
	o.KubeconfigIn = in
	o.KubeconfigOut = filepath.Join(dir, "state", "kubelet-nllb.conf")
	o.StateFile = filepath.Join(dir, "state", "feed", "nllb-upstreams.json")
	o.StateFilePoll = 100 * time.Millisecond
	o.APIServerPort = uint16(ports[0])
	o.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", ports[1])
	o.HealthMode = HealthTCP
	o.Seeds = []netip.AddrPort{seed}
	pod, err := StaticPod(o, StaticPodOptions{Image: "localhost/herald:dev", LogLevel: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	c := pod.Spec.Containers[0]
	for _, m := range c.VolumeMounts {
		if !m.ReadOnly {
			if err := os.MkdirAll(m.MountPath, 0o755); err != nil { // DirectoryOrCreate
				t.Fatal(err)
			}
		}
	}
	var logs logbuf.Buffer
	cmd := exec.CommandContext(ctx, bin, c.Args...)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("herald nllb logs:\n%s", strings.Join(logs.Lines(), "\n"))
		}
	}()
	probe := c.LivenessProbe.HTTPGet
	healthz := fmt.Sprintf("http://%s/healthz", net.JoinHostPort(probe.Host, probe.Port.String()))
	waitFor(t, "the liveness probe's /healthz", 30*time.Second, func() bool {
		resp, err := http.Get(healthz)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, &logs)
	kc, err := clientcmd.BuildConfigFromFlags("", o.KubeconfigOut)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("https://127.0.0.1:%d", ports[0]); kc.Host != want {
		t.Errorf("patched server %s, want %s", kc.Host, want)
	}
	viaLB, err := kubernetes.NewForConfig(kc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := viaLB.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("a node's request through the static pod's balancer: %v", err)
	}
	if err := nllb.SaveUpstreams(o.StateFile, []netip.AddrPort{netip.MustParseAddrPort("192.0.2.7:6443")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new file applied", 30*time.Second, func() bool {
		return len(logs.Lines("upstream file applied", "192.0.2.7:6443")) == 1
	}, &logs)
	if _, err := viaLB.CoreV1().Services("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("a request with 192.0.2.7 (nothing there) in the set: %v", err)
	}
}
