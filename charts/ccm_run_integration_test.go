//go:build integration

package charts

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/gobuild"
	"github.com/herald-lb/herald/internal/logbuf"
)

var (
	buildOnce sync.Once
	herald    string
	buildErr  error
)

// heraldBinary builds the herald binary once for the package.
func heraldBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "herald-chart-bin-")
		if err != nil {
			buildErr = err
			return
		}
		// herald ccm runs herald-ccm from beside herald, as in Herald's image.
		herald = filepath.Join(dir, "herald")
		out, err := gobuild.Command(context.Background(), dir+"/", "../cmd/herald", "../cmd/herald-ccm").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building herald: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return herald
}

// impersonatingKubeconfig writes a kubeconfig with the admin's credentials impersonating ServiceAccount ns/name.
func impersonatingKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	return writeKubeconfig(t, &clientcmdapi.AuthInfo{ClientCertificate: srv.Config.CertFile, ClientKey: srv.Config.KeyFile,
		Impersonate:       "system:serviceaccount:" + ns + ":" + name,
		ImpersonateGroups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}})
}

// writeKubeconfig writes a kubeconfig for the test API server with the given credentials.
func writeKubeconfig(t *testing.T, auth *clientcmdapi.AuthInfo) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["it"] = &clientcmdapi.Cluster{Server: srv.Config.Host, CertificateAuthority: srv.Config.CAFile}
	kc.AuthInfos["user"] = auth
	kc.Contexts["it"] = &clientcmdapi.Context{Cluster: "it", AuthInfo: "user"}
	kc.CurrentContext = "it"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestCCMRunsWithChartRBAC runs the real `herald ccm` binary as the chart's ccm ServiceAccount (impersonated),
// with the chart's RBAC only, for each switch combination, with the manager's defaults the chart keeps (leader
// election through the Lease cloud-controller-manager in kube-system, the HTTPS port with delegated
// authentication): the node half initializes a tainted node, the load-balancing half gives a Service an address
// (Herald's controller inside, with the controller's rights) and lets it go on delete; /healthz answers; the log
// has no "forbidden". Then the rights of the half that is off must be missing (exactly the enabled controllers).
func TestCCMRunsWithChartRBAC(t *testing.T) {
	bin := heraldBinary(t)
	admin := newClients(t, srv.Config)
	for i, tc := range []struct {
		name              string
		lb, nodeLifecycle bool
	}{
		{"both", true, true},
		{"load-balancer", true, false},
		{"node-lifecycle", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, svclbNS, appNS := fmt.Sprintf("herald-ccmrun-%d", i), fmt.Sprintf("herald-ccmrun-%d-svclb", i), fmt.Sprintf("ccmrun-apps-%d", i)
			installRBAC(t, ns, svclbNS, "--set", "ccm.enabled=true",
				"--set", fmt.Sprintf("ccm.enableLoadBalancer=%v", tc.lb), "--set", fmt.Sprintf("ccm.enableNodeLifecycle=%v", tc.nodeLifecycle))
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := newApplier(t, srv.Config).ensureNamespace(ctx, appNS); err != nil {
				t.Fatal(err)
			}
			if err := admin.c.Create(ctx, &v1beta1.IPAddressPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "addrs"},
				Spec: v1beta1.IPAddressPoolSpec{Addresses: []string{fmt.Sprintf("198.51.100.%d/32", 40+i)}}}); err != nil {
				t.Fatal(err)
			}
			nodeName := fmt.Sprintf("ccmrun-node-%d", i)
			_, err := admin.cs.CoreV1().Nodes().Create(ctx, &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: nodeName, Annotations: map[string]string{"herald.dev/internal-ip": fmt.Sprintf("10.9.0.%d", i+1)}},
				Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true",
					Effect: corev1.TaintEffectNoSchedule}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = admin.cs.CoreV1().Nodes().Delete(context.Background(), nodeName, metav1.DeleteOptions{}) }()
			_, err = admin.cs.CoreV1().Services(appNS).Create(ctx, &corev1.Service{
				ObjectMeta: metav1.ObjectMeta{Name: "web"},
				Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
					Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
			}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = admin.cs.CoreV1().Services(appNS).Delete(context.Background(), "web", metav1.DeleteOptions{})
			}()

			port := freePort(t)
			logs := &logbuf.Buffer{}
			cmd := exec.Command(bin, "ccm", "--kubeconfig="+impersonatingKubeconfig(t, ns, ns+"-ccm"),
				"--cloud-provider=herald", fmt.Sprintf("--enable-load-balancer=%v", tc.lb), fmt.Sprintf("--enable-node-lifecycle=%v", tc.nodeLifecycle),
				"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
				// The delegated authentication of the HTTPS port reads its configuration with the same identity.
				"--authentication-kubeconfig="+impersonatingKubeconfig(t, ns, ns+"-ccm"),
				"--authorization-kubeconfig="+impersonatingKubeconfig(t, ns, ns+"-ccm"),
				"--namespace="+ns, "--svclb-namespace="+svclbNS, "--svclb-image=herald:test", "--bgp-passwords-secret="+ns+"-bgp-passwords", "-v=2")
			cmd.Stdout, cmd.Stderr = logs, logs
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
				// The next run takes the manager's Lease at once.
				_ = admin.cs.CoordinationV1().Leases("kube-system").Delete(context.Background(), "cloud-controller-manager", metav1.DeleteOptions{})
				if t.Failed() {
					t.Logf("herald ccm log:\n%s", logs.String())
				}
			}()

			poll := func(what string, cond func() (bool, error)) {
				t.Helper()
				var last error
				if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
					ok, err := cond()
					last = err
					return ok, nil
				}); err != nil {
					t.Fatalf("%s: not within 90 s (last error: %v)", what, last)
				}
			}
			poll("/healthz answers", func() (bool, error) {
				cl := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a self-signed test endpoint
				resp, err := cl.Get(fmt.Sprintf("https://127.0.0.1:%d/healthz", port))
				if err != nil {
					return false, err
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK, fmt.Errorf("status %d", resp.StatusCode)
			})
			if tc.nodeLifecycle {
				poll("node initialized", func() (bool, error) {
					n, err := admin.cs.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					// (The API server's admission adds node.kubernetes.io/not-ready to a new Node; only the
					// uninitialized taint is the manager's.)
					ok := !slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == "node.cloudprovider.kubernetes.io/uninitialized" }) &&
						n.Spec.ProviderID == "herald://"+nodeName && len(n.Status.Addresses) == 1 &&
						n.Status.Addresses[0].Address == fmt.Sprintf("10.9.0.%d", i+1)
					return ok, fmt.Errorf("taints %v, provider ID %q, addresses %v", n.Spec.Taints, n.Spec.ProviderID, n.Status.Addresses)
				})
			}
			if tc.lb {
				poll("service address and finalizer", func() (bool, error) {
					s, err := admin.cs.CoreV1().Services(appNS).Get(ctx, "web", metav1.GetOptions{})
					if err != nil {
						return false, err
					}
					return len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == fmt.Sprintf("198.51.100.%d", 40+i) &&
						slices.Contains(s.Finalizers, "service.kubernetes.io/load-balancer-cleanup"), nil
				})
				if err := admin.cs.CoreV1().Services(appNS).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				poll("service deleted", func() (bool, error) {
					_, err := admin.cs.CoreV1().Services(appNS).Get(ctx, "web", metav1.GetOptions{})
					return apierrors.IsNotFound(err), nil
				})
			}
			// Let the event sinks flush, then no request may have been refused.
			time.Sleep(2 * time.Second)
			if l := logs.String(); strings.Contains(l, "forbidden") {
				var lines []string
				for _, line := range strings.Split(l, "\n") {
					if strings.Contains(line, "forbidden") {
						lines = append(lines, line)
					}
				}
				t.Errorf("herald ccm was refused requests:\n%s", strings.Join(lines, "\n"))
			}

			// The half that is off has no rights.
			sa := newClients(t, as(ns, ns+"-ccm"))
			_, err = sa.cs.CoreV1().Nodes().Patch(ctx, nodeName, types.MergePatchType, []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
			_, errUpdate := sa.cs.CoreV1().Nodes().Update(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}}, metav1.UpdateOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("patch Node: %v, want Forbidden (only update is needed)", err)
			}
			if got := apierrors.IsForbidden(errUpdate); got == tc.nodeLifecycle {
				t.Errorf("update Node with node lifecycle %v: %v", tc.nodeLifecycle, errUpdate)
			}
			_, err = sa.cs.CoreV1().Services(appNS).List(ctx, metav1.ListOptions{})
			if got := apierrors.IsForbidden(err); got == tc.lb {
				t.Errorf("list Services with load balancing %v: %v", tc.lb, err)
			}
			err = sa.cs.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
			if !apierrors.IsForbidden(err) {
				t.Errorf("delete Node: %v, want Forbidden (Herald's instances always exist)", err)
			}
		})
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
