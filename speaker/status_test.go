package speaker

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/herald-lb/herald/announce/l2"
	"github.com/herald-lb/herald/config/v1beta1"
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
		ann("10.0.0.4", "n1", nil, "a/dflt"),
		ann("10.0.0.5", "n1", []string{"eth9"}, "a/mixed"),
		ann("fd00::1", "n1", []string{"eth0"}, "a/web"),
		ann("fd00::2", "n1", nil, "a/split"),
		ann("fd00::4", "n1", nil, "a/dflt"),
		ann("fd00::5", "n1", nil, "a/mixed"),
	}
	st := func(key string, addrs, ifs []string) *desiredStatus {
		ns, name, _ := strings.Cut(key, "/")
		return &desiredStatus{namespace: ns, name: name, addrs: addrs, ifaces: ifs}
	}
	n1 := func(dflt, mixed []string) map[string]*desiredStatus {
		return map[string]*desiredStatus{
			"a/web":    st("a/web", []string{"10.0.0.1", "fd00::1"}, []string{"eth0", "eth1"}),
			"b/shared": st("b/shared", []string{"10.0.0.1"}, []string{"eth1"}),
			"a/other":  st("a/other", []string{"10.0.0.3"}, []string{"eth0", "eth1"}),
			"a/dflt":   st("a/dflt", []string{"10.0.0.4", "fd00::4"}, dflt),
			"a/mixed":  st("a/mixed", []string{"10.0.0.5", "fd00::5"}, mixed),
			// a/split: its lowest address is on n2, which writes the object.
		}
	}
	tests := []struct {
		name string
		node string
		def  []string // the announcer's default set (sorted)
		want map[string]*desiredStatus
	}{
		{name: "default set resolved; explicit and default merged, sorted",
			node: "n1", def: []string{"br0", "eth0"},
			want: n1([]string{"br0", "eth0"}, []string{"br0", "eth0", "eth9"})},
		{name: "the default set changed",
			node: "n1", def: []string{"bond0"},
			want: n1([]string{"bond0"}, []string{"bond0", "eth9"})},
		{name: "no eligible interface: none listed for the default",
			node: "n1", def: nil,
			want: n1(nil, []string{"eth9"})},
		{name: "default overlapping explicit names listed once",
			node: "n1", def: []string{"eth9"},
			want: n1([]string{"eth9"}, []string{"eth9"})},
		{name: "the node of the lowest address writes",
			node: "n2", def: []string{"eth0", "eth3"},
			want: map[string]*desiredStatus{"a/split": st("a/split", []string{"10.0.0.2"}, []string{"eth0", "eth3"})}},
		{name: "a node announcing nothing", node: "n3", def: []string{"eth0"}, want: map[string]*desiredStatus{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			def := slices.Clone(tt.def)
			got := statusByService(plan.Result{L2: all}.L2Statuses(tt.node), def)
			if !reflect.DeepEqual(got, tt.want) {
				for k, v := range got {
					t.Logf("got  %s: %+v", k, *v)
				}
				for k, v := range tt.want {
					t.Logf("want %s: %+v", k, *v)
				}
				t.Errorf("wrong grouping")
			}
			if !slices.Equal(def, tt.def) {
				t.Errorf("statusByService changed the default set to %q", def)
			}
		})
	}
}

func TestStatusName(t *testing.T) {
	if n := StatusName("default", "web"); n != "default.web" {
		t.Errorf("StatusName = %q", n)
	}
}

// recording is a minimal Announcer for unit tests.
type recording struct {
	stats map[string]l2.Counters
	def   []string
}

func (r *recording) Set(map[netip.Addr][]string) error { return nil }
func (r *recording) DefaultInterfaces() []string       { return r.def }
func (r *recording) DefaultChanged() <-chan struct{}   { return nil }
func (r *recording) Stats() map[string]l2.Counters     { return r.stats }
func (r *recording) Reannounce()                       {}
func (r *recording) Close() error                      { return nil }

func TestL2Collector(t *testing.T) {
	r := &recording{stats: map[string]l2.Counters{"eth0": {Answered: 3, Gratuitous: 2}, "eth1": {Answered: 1}},
		def: []string{"br0", "eth0", "eth1"}}
	if v := testutil.ToFloat64(l2Interfaces(r)); v != 3 {
		t.Errorf("herald_l2_interfaces = %v, want 3", v)
	}
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

// TestOddInterfaceNames (issue 22, part 7): Linux allows interface names
// that are not valid UTF-8. The speaker's whole scrape must still succeed
// (before: the collector panicked, which took the speaker down), two names
// that escape alike must not make a duplicate series, and the names written
// to ServiceL2Status must read back equal (JSON would replace the bytes and
// the status would be rewritten on every plan).
func TestOddInterfaceNames(t *testing.T) {
	odd, odd2 := "eth\xff", `eth\xff` // the second is what the first escapes to
	r := &recording{stats: map[string]l2.Counters{odd: {Answered: 3}, odd2: {Answered: 4}, "eth0": {Answered: 1}},
		def: []string{odd, "eth0"}}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(&l2Collector{ann: r,
		answered:   prometheus.NewDesc("herald_l2_requests_answered_total", "h", []string{"interface"}, nil),
		gratuitous: prometheus.NewDesc("herald_l2_gratuitous_sent_total", "h", []string{"interface"}, nil),
	})
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("scrape: HTTP %d: %s", rec.Code, rec.Body)
	}
	if !strings.Contains(rec.Body.String(), `herald_l2_requests_answered_total{interface="eth\\xff"} 7`) {
		t.Errorf("scrape has no escaped interface with both counts:\n%s", rec.Body)
	}

	got := statusByService(plan.Result{L2: []plan.L2Announcement{ann("10.0.0.1", "n1", nil, "a/web")}}.L2Statuses("n1"), r.def)
	obj := v1beta1.ServiceL2Status{Status: v1beta1.ServiceL2StatusStatus{Interfaces: got["a/web"].ifaces}}
	raw, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	var back v1beta1.ServiceL2Status
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(back.Status.Interfaces, got["a/web"].ifaces) {
		t.Errorf("interfaces %q read back as %q: the status would be rewritten on every plan", got["a/web"].ifaces, back.Status.Interfaces)
	}
}
