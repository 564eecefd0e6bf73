//go:build e2e

package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/kubeapi"
)

// TestAlertBGPSessionDown runs a real Prometheus (Debian's) with the chart's alert rules as `helm template` renders
// them, scraping every speaker of the cluster, and breaks a BGP session: HeraldBGPSessionDown must fire for that
// session (naming its peer and the speaker's node) and no other, and resolve when the session is back. Prometheus
// runs on the test's host and reaches the speakers through a forward proxy whose connections start at the cluster's
// client host (the way an in-cluster Prometheus sees the nodes).
func TestAlertBGPSessionDown(t *testing.T) {
	ctx := testContext(t, 6*time.Minute)
	f := installSpeakers(t, ctx)
	noBGPPeers(t, ctx, f)
	node := cluster.Nodes()[0]
	rt := cluster.Routers()[0]

	prom := startPrometheus(t, ctx, "e2e-alerts", "--set", "metrics.prometheusRule.alerts.bgpSessionDown.for=5s")

	peer := &v1beta1.BGPPeer{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-alert-" + rt.Name(), Namespace: "herald-system"},
		Spec: v1beta1.BGPPeerSpec{MyASN: rt.PeerASN(), PeerASN: rt.ASN(), PeerAddress: routerIPv4(rt).String(),
			HoldTime: &metav1.Duration{Duration: 9 * time.Second}, ConnectTime: &metav1.Duration{Duration: 2 * time.Second},
			NodeSelectors: []v1beta1.LabelSelector{v1beta1.MatchLabels(map[string]string{"kubernetes.io/hostname": node.Name})}},
	}
	f.create(t, ctx, peer)
	session := fmt.Sprintf(`herald_bgp_session_up{peer=%q}`, peer.Name)

	// A positive signal first: Prometheus scrapes the session as up, and once its rules have seen that (the alert
	// may be pending from the scrapes before the session came up), nothing is pending or firing.
	waitFor(t, ctx, "Prometheus to see the session up and no HeraldBGPSessionDown", func() (bool, error) {
		v, err := prom.query(ctx, session)
		if err != nil || len(v) != 1 || v[0] != 1 {
			return false, err
		}
		return len(prom.alerts(t, ctx, "HeraldBGPSessionDown")) == 0, nil
	})

	// Break it: the speaker now expects another AS from the router, which its OPEN does not carry.
	f.update(t, ctx, peer, func() { peer.Spec.PeerASN = rt.ASN() + 1 })
	broken := time.Now()
	var alert promAlert
	waitFor(t, ctx, "HeraldBGPSessionDown to fire", func() (bool, error) {
		for _, a := range prom.alerts(t, ctx, "HeraldBGPSessionDown") {
			if a.State == "firing" {
				alert = a
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("HeraldBGPSessionDown firing %.1f s after the peer's AS was broken: %v; %s", time.Since(broken).Seconds(),
		alert.Labels, alert.Annotations["summary"])
	if alert.Labels["peer"] != peer.Name || alert.Labels["severity"] != "warning" ||
		!strings.HasPrefix(alert.Labels["instance"], node.IPv4.String()+":") {
		t.Errorf("the alert names peer %q, severity %q, instance %q; want %s, warning, %s", alert.Labels["peer"],
			alert.Labels["severity"], alert.Labels["instance"], peer.Name, node.IPv4)
	}
	if !strings.Contains(alert.Annotations["summary"], peer.Name) {
		t.Errorf("the alert's summary does not name the peer: %q", alert.Annotations["summary"])
	}
	if all := prom.alerts(t, ctx, "HeraldBGPSessionDown"); len(all) != 1 {
		t.Errorf("one session is down, but %d HeraldBGPSessionDown alerts: %v", len(all), all)
	}

	// Mend it: the alert goes away.
	f.update(t, ctx, peer, func() { peer.Spec.PeerASN = rt.ASN() })
	waitFor(t, ctx, "HeraldBGPSessionDown to resolve", func() (bool, error) {
		return len(prom.alerts(t, ctx, "HeraldBGPSessionDown")) == 0, nil
	})
}

// prometheus is a Prometheus server the test started.
type prometheus struct{ url string }

// startPrometheus starts Debian's prometheus on the host with the chart's alert rules (helm template with
// metrics.prometheusRule.enabled and helmArgs), a 1 s scrape and evaluation interval, and every node's speaker as
// a target, reached through a forward proxy that dials from the cluster's client host. It is stopped (by PID) when
// the test ends; its log is printed when the test failed.
func startPrometheus(t *testing.T, ctx context.Context, name string, helmArgs ...string) *prometheus {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatalf("prometheus not found (Debian package prometheus; e2e/lab/install.sh apt installs it): %v", err)
	}
	dir := t.TempDir()

	// The rules: the PrometheusRule's spec is a rule file.
	args := append([]string{"template", "herald", "../charts/herald", "--namespace", "herald-system",
		"--set", "metrics.prometheusRule.enabled=true", "--show-only", "templates/prometheusrule.yaml"}, helmArgs...)
	out, err := exec.CommandContext(ctx, kubeapi.HelmPath(), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	rules := ruleFile(string(out))
	if !strings.Contains(rules, "alert: ") {
		t.Fatalf("helm template rendered no alert:\n%s", out)
	}
	writeFile(t, filepath.Join(dir, "rules.yaml"), rules)

	proxy := clientProxy(t)
	var targets []string
	for _, n := range cluster.Nodes() {
		targets = append(targets, fmt.Sprintf("%q", netip.AddrPortFrom(n.IPv4, speakerMetricsPort).String()))
	}
	writeFile(t, filepath.Join(dir, "prometheus.yml"), fmt.Sprintf(`global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
rule_files: [rules.yaml]
scrape_configs:
- job_name: herald-speaker
  proxy_url: http://%s
  static_configs:
  - targets: [%s]
`, proxy, strings.Join(targets, ", ")))

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logPath := filepath.Join(dir, "prometheus.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file", filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path",
		filepath.Join(dir, "data"), "--web.listen-address", addr)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting prometheus: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("prometheus log:\n%s", b)
		}
	})
	p := &prometheus{url: "http://" + addr}
	waitFor(t, ctx, "prometheus to load its rules and scrape every speaker", func() (bool, error) {
		v, err := p.query(ctx, `up{job="herald-speaker"}`)
		if err != nil || len(v) != len(cluster.Nodes()) {
			return false, err
		}
		for _, x := range v {
			if x != 1 {
				return false, nil
			}
		}
		return true, nil
	})
	return p
}

// ruleFile turns the PrometheusRule that helm rendered into a Prometheus rule file: its spec, one level up.
func ruleFile(rendered string) string {
	var b strings.Builder
	on := false
	s := bufio.NewScanner(strings.NewReader(rendered))
	for s.Scan() {
		line := s.Text()
		if line == "spec:" {
			on = true
			continue
		}
		if on {
			b.WriteString(strings.TrimPrefix(line, "  ") + "\n")
		}
	}
	return b.String()
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// clientProxy is a forward HTTP proxy on the host's loopback whose requests are made from the cluster's client
// host; it returns its address and closes when the test ends.
func clientProxy(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hc := cluster.Client().HTTP()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(w, "a forward proxy: absolute URLs only", http.StatusBadRequest)
			return
		}
		req, err := http.NewRequestWithContext(r.Context(), r.Method, r.URL.String(), nil)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		req.Header = r.Header.Clone()
		resp, err := hc.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		for k, v := range resp.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, resp.Body)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// query returns the values of an instant query's vector.
func (p *prometheus) query(ctx context.Context, q string) ([]float64, error) {
	var res struct {
		Data struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/query?query="+url.QueryEscape(q), &res); err != nil {
		return nil, err
	}
	var out []float64
	for _, r := range res.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %q: %w", q, s, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// promAlert is an alert as Prometheus's /api/v1/alerts lists it.
type promAlert struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	State       string            `json:"state"`
}

// alerts lists the pending and firing alerts named name.
func (p *prometheus) alerts(t *testing.T, ctx context.Context, name string) []promAlert {
	t.Helper()
	var res struct {
		Data struct {
			Alerts []promAlert `json:"alerts"`
		} `json:"data"`
	}
	if err := p.get(ctx, "/api/v1/alerts", &res); err != nil {
		t.Fatal(err)
	}
	var out []promAlert
	for _, a := range res.Data.Alerts {
		if a.Labels["alertname"] == name {
			out = append(out, a)
		}
	}
	return out
}

func (p *prometheus) get(ctx context.Context, path string, into any) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, p.url+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("prometheus GET %s: %s: %s", path, resp.Status, b)
	}
	return json.NewDecoder(resp.Body).Decode(into)
}
