//go:build integration

package charts

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/herald-lb/herald/internal/kubeapi"
)

// TestMemberlistProfileAuto: memberlist.profile auto (the default) renders the fast profile while the cluster has at
// most memberlist.autoFastUpTo (50) nodes and the default profile beyond, counting the nodes of the API server helm
// talks to (helm template --dry-run=server, as helm install and upgrade do); a profile set by hand is kept.
func TestMemberlistProfileAuto(t *testing.T) {
	helm := kubeapi.HelmPath()
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("helm not found at %s: %v", helm, err)
	}
	ctx := context.Background()
	cs := newClients(t, srv.Config).cs
	kubeconfig := writeKubeconfig(t, &clientcmdapi.AuthInfo{ClientCertificate: srv.Config.CertFile, ClientKey: srv.Config.KeyFile})
	profile := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(helm, append([]string{"template", "herald", chartDir, "--namespace", "herald-system",
			"--dry-run=server", "--kubeconfig", kubeconfig, "--show-only", "templates/speaker.yaml"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("helm template: %v\n%s", err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "- --memberlist-profile="); ok {
				return v
			}
		}
		t.Fatalf("no --memberlist-profile in the speaker DaemonSet:\n%s", out)
		return ""
	}
	nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	have := len(nodes.Items)
	if have > 50 {
		t.Fatalf("the test API server already has %d nodes", have)
	}
	addNode := func(i int) {
		t.Helper()
		name := fmt.Sprintf("it-profile-%03d", i)
		if _, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	}
	for i := have; i < 50; i++ {
		addNode(i)
	}
	if got := profile(); got != "fast" {
		t.Errorf("50 nodes, profile auto: rendered %q, want fast", got)
	}
	addNode(50)
	if got := profile(); got != "default" {
		t.Errorf("51 nodes, profile auto: rendered %q, want default", got)
	}
	if got := profile("--set", "memberlist.autoFastUpTo=100"); got != "fast" {
		t.Errorf("51 nodes, autoFastUpTo 100: rendered %q, want fast", got)
	}
	if got := profile("--set", "memberlist.profile=fast"); got != "fast" {
		t.Errorf("51 nodes, profile fast: rendered %q, want fast", got)
	}
}
