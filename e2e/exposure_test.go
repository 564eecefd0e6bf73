//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"testing"
	"time"

	"github.com/herald-lb/herald/e2e"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// hostListenerPort is a port no Service uses: a hostNetwork echo listens on it on every node (TCP on [::], which
// takes IPv4 too), standing in for sshd, the kubelet or any other node-local listener.
const hostListenerPort = 47222

// hostListeners runs the echo backend with hostNetwork on every node, HTTP on hostListenerPort, in ns, and waits
// until each answers at its node's addresses from the lan client (the positive control of onlyServicePorts; the
// host behind the router has routes to the BGP range only).
func hostListeners(t *testing.T, ctx context.Context, ns string) {
	t.Helper()
	kube := cluster.Kube()
	labels := map[string]string{"app": "host-listener"}
	c := echoContainer(fmt.Sprintf(":%d", hostListenerPort), fmt.Sprintf(":%d", hostListenerPort+1))
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "host-listener", Namespace: ns},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					HostNetwork: true,
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{c},
				},
			},
		},
	}
	if _, err := kube.AppsV1().DaemonSets(ns).Create(ctx, ds, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range cluster.Nodes() {
		for _, a := range []netip.Addr{n.IPv4, n.IPv6} {
			if !a.IsValid() {
				continue
			}
			url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(a, hostListenerPort))
			waitFor(t, ctx, "the host listener at "+url, func() (bool, error) {
				_, err := getFrom(ctx, cluster.Client(), url)
				return err == nil, nil
			})
		}
	}
}

// getFrom fetches url from client with a 2-second limit and returns the body.
func getFrom(ctx context.Context, client e2e.ClientHost, url string) (string, error) {
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.HTTP().Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("HTTP %d: %.80s", resp.StatusCode, b), err
}

// onlyServicePorts checks from client that each announced address answers on the Service's port 80 and that
// nothing on the nodes answers at it on ports the Service does not have: the host listeners (hostListeners, the
// caller starts them) and the speaker's own metrics port. The nodes' own addresses answer on both (checked by
// hostListeners and by the suites that read the speakers' metrics), so a failure here is the announced address
// reaching a node-local socket.
func onlyServicePorts(t *testing.T, ctx context.Context, client e2e.ClientHost, addrs []netip.Addr) {
	t.Helper()
	for _, a := range addrs {
		url := fmt.Sprintf("http://%s/", netip.AddrPortFrom(a, 80))
		waitFor(t, ctx, "the Service's port at "+url, func() (bool, error) {
			_, err := getFrom(ctx, client, url)
			return err == nil, nil
		})
		for _, port := range []int{hostListenerPort, speakerMetricsPort} {
			url := fmt.Sprintf("http://%s/metrics", netip.AddrPortFrom(a, uint16(port)))
			if got, err := getFrom(ctx, client, url); err == nil {
				t.Errorf("%s answered at the announced address: %s", url, got)
			} else {
				t.Logf("%s: no answer, as it must be (%v)", url, err)
			}
		}
	}
}
