package speaker

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/herald-lb/herald/speaker/plan"
)

func ann(addr, node string, ifs []string, svcs ...string) plan.L2Announcement {
	return plan.L2Announcement{Addr: netip.MustParseAddr(addr), Node: node, Interfaces: ifs, Services: svcs}
}

func TestStatusByService(t *testing.T) {
	all := []plan.L2Announcement{ // sorted by address, as plan.Result.L2
		ann("10.0.0.1", "n1", []string{"eth1"}, "a/web", "b/shared"),
		ann("10.0.0.2", "n2", nil, "a/split"),
		ann("10.0.0.3", "n1", []string{"eth0", "eth1"}, "a/other"),
		ann("fd00::1", "n1", []string{"eth0"}, "a/web"),
		ann("fd00::2", "n1", nil, "a/split"),
	}
	got := statusByService(all, "n1")
	want := map[string]*desiredStatus{
		"a/web":    {namespace: "a", name: "web", addrs: []string{"10.0.0.1", "fd00::1"}, ifaces: []string{"eth0", "eth1"}},
		"b/shared": {namespace: "b", name: "shared", addrs: []string{"10.0.0.1"}, ifaces: []string{"eth1"}},
		"a/other":  {namespace: "a", name: "other", addrs: []string{"10.0.0.3"}, ifaces: []string{"eth0", "eth1"}},
		// a/split: its lowest address is on n2, which writes the object.
	}
	if !reflect.DeepEqual(got, want) {
		for k, v := range got {
			t.Logf("%s: %+v", k, *v)
		}
		t.Errorf("n1: wrong grouping")
	}
	got = statusByService(all, "n2")
	if len(got) != 1 || got["a/split"] == nil || got["a/split"].ifaces != nil || !got["a/split"].allIfaces ||
		!reflect.DeepEqual(got["a/split"].addrs, []string{"10.0.0.2"}) {
		t.Errorf("n2: %+v", got["a/split"])
	}
}

func TestStatusName(t *testing.T) {
	if n := StatusName("default", "web"); n != "default.web" {
		t.Errorf("StatusName = %q", n)
	}
}

// recording is a minimal Announcer for unit tests.
type recording struct{ stats map[string]L2Counters }

func (r *recording) SetL2(map[netip.Addr][]string) error { return nil }
func (r *recording) L2Stats() map[string]L2Counters      { return r.stats }
func (r *recording) Reannounce()                         {}
func (r *recording) Close() error                        { return nil }

func TestL2Collector(t *testing.T) {
	r := &recording{stats: map[string]L2Counters{"eth0": {Answered: 3, Gratuitous: 2}, "eth1": {Answered: 1}}}
	c := &l2Collector{ann: r,
		answered:   prometheus.NewDesc("herald_l2_requests_answered_total", "h", []string{"interface"}, nil),
		gratuitous: prometheus.NewDesc("herald_l2_gratuitous_sent_total", "h", []string{"interface"}, nil),
	}
	want := `
# HELP herald_l2_requests_answered_total h
# TYPE herald_l2_requests_answered_total counter
herald_l2_requests_answered_total{interface="eth0"} 3
herald_l2_requests_answered_total{interface="eth1"} 1
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "herald_l2_requests_answered_total"); err != nil {
		t.Error(err)
	}
	m := &metrics{announced: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "herald_l2_announced", Help: "h"}, []string{"service", "address", "node"})}
	m.setAnnounced("n1", []plan.L2Announcement{ann("10.0.0.1", "n1", nil, "a/web", "b/shared")})
	m.setAnnounced("n1", []plan.L2Announcement{ann("10.0.0.2", "n1", nil, "a/web")})
	want = `
# HELP herald_l2_announced h
# TYPE herald_l2_announced gauge
herald_l2_announced{address="10.0.0.2",node="n1",service="a/web"} 1
`
	if err := testutil.CollectAndCompare(m.announced, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}
