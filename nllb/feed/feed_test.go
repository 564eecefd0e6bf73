package feed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/herald-lb/herald/internal/logbuf"
	"github.com/herald-lb/herald/nllb"
)

func aps(s ...string) []netip.AddrPort {
	var out []netip.AddrPort
	for _, a := range s {
		out = append(out, netip.MustParseAddrPort(a))
	}
	return out
}

// TestFollowerCheck walks one Follower through a sequence of file contents:
// each step writes (or removes) the file, calls Check once and says what
// must be applied (nothing, or the set) and which log line must appear.
// The seed stays in every set; a missing, empty, corrupt or other-family
// file changes nothing and is logged once; unchanged content is not
// parsed again; a failed Apply is retried at the next read.
func TestFollowerCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nllb-upstreams.json")
	logs := &logbuf.Buffer{}
	var applied [][]netip.AddrPort
	failNext := false
	reg := prometheus.NewRegistry()
	met, err := NewMetrics(reg, SourceFile)
	if err != nil {
		t.Fatal(err)
	}
	f := &Follower{
		Path: path, Seeds: aps("192.0.2.1:6443"), Current: aps("192.0.2.1:6443"), Metrics: met,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Apply: func(ups []netip.AddrPort) error {
			if failNext {
				failNext = false
				return errors.New("balancer refused")
			}
			applied = append(applied, ups)
			return nil
		},
	}
	set := func(s ...string) func() {
		return func() {
			if err := nllb.SaveUpstreams(path, aps(s...)); err != nil {
				t.Fatal(err)
			}
		}
	}
	raw := func(content string) func() {
		return func() {
			if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		name  string
		write func()
		fail  bool
		want  []netip.AddrPort // nil: nothing applied
		log   string           // a line that must be logged (once in all)
	}{
		{name: "missing file", write: func() { _ = os.Remove(path) }, log: "not written yet"},
		{name: "still missing: logged once", write: func() {}},
		{name: "the speaker writes two servers", write: set("10.0.0.11:6443", "10.0.0.12:6443"),
			want: aps("10.0.0.11:6443", "10.0.0.12:6443", "192.0.2.1:6443"), log: "upstream file applied"},
		{name: "same content: nothing", write: func() {}},
		{name: "same set, other bytes: nothing", write: raw(`{"version":1,"upstreams":["10.0.0.12:6443","10.0.0.11:6443"]}`)},
		{name: "truncated", write: raw(`{"version":1,"upstr`), log: "unusable"},
		{name: "truncated again: logged once", write: func() {}},
		// The same error as the truncated file: not logged again.
		{name: "empty file", write: raw(``), log: "unexpected end of JSON input"},
		{name: "empty list", write: raw(`{"version":1,"upstreams":[]}`), log: "no upstream"},
		{name: "another version", write: raw(`{"version":2,"upstreams":["10.0.0.13:6443"]}`), log: "format version 2"},
		{name: "a bad address", write: raw(`{"version":1,"upstreams":["10.0.0.13"]}`), log: "10.0.0.13"},
		{name: "IPv6 only on an IPv4 balancer", write: set("[fd00::11]:6443"), log: "no upstream of the balancer's family"},
		{name: "mixed families: the IPv4 ones", write: set("[fd00::11]:6443", "10.0.0.13:6443"),
			want: aps("10.0.0.13:6443", "192.0.2.1:6443")},
		{name: "the seed listed too: once", write: set("192.0.2.1:6443", "10.0.0.14:6443"), want: aps("10.0.0.14:6443", "192.0.2.1:6443")},
		{name: "apply fails", write: set("10.0.0.15:6443"), fail: true, log: "balancer refused"},
		{name: "retried at the next read", write: func() {}, want: aps("10.0.0.15:6443", "192.0.2.1:6443")},
		{name: "file removed: the set stays", write: func() { _ = os.Remove(path) }},
		{name: "written again with the same set: nothing", write: set("10.0.0.15:6443")},
	}
	for _, st := range steps {
		before := len(applied)
		st.write()
		failNext = st.fail
		got := f.Check()
		var now []netip.AddrPort
		if len(applied) > before {
			now = applied[len(applied)-1]
		}
		if !slices.Equal(now, st.want) || !slices.Equal(got, st.want) {
			t.Errorf("%s: applied %v (returned %v), want %v", st.name, now, got, st.want)
		}
		if st.log != "" {
			if n := logs.Count(st.log); n != 1 {
				t.Errorf("%s: %d lines with %q, want 1; logs:\n%s", st.name, n, st.log, logs.String())
			}
		}
	}
	if n := logs.Count("not written yet"); n != 2 {
		// Once at the start, once after the removal near the end.
		t.Errorf("%d lines about the missing file, want 2", n)
	}
	if n := logs.Count("unusable"); n != 4 {
		t.Errorf("%d lines about unusable content, want 4 (truncated, empty, other version, bad address)", n)
	}
	if got := testutil.ToFloat64(met.updates); got != 4 {
		t.Errorf("updates counted: %v, want 4", got)
	}
	if got := testutil.ToFloat64(met.last); got == 0 {
		t.Error("last update time not set")
	}
}

// TestFollowerIPv6: an IPv6 balancer keeps the file's IPv6 upstreams; a
// file listing the starting set applies nothing.
func TestFollowerIPv6(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.json")
	if err := nllb.SaveUpstreams(path, aps("[fd00::11]:6443", "10.0.0.11:6443", "[fd00::12]:6443")); err != nil {
		t.Fatal(err)
	}
	var got []netip.AddrPort
	f := &Follower{Path: path, IPv6: true, Seeds: aps("[fd00::1]:6443"), Current: aps("[fd00::1]:6443", "[fd00::11]:6443", "[fd00::12]:6443"),
		Apply: func(ups []netip.AddrPort) error { got = ups; return nil }, Logger: slog.New(slog.DiscardHandler)}
	if f.Check() != nil || got != nil {
		t.Errorf("the starting set applied again: %v", got)
	}
	if err := nllb.SaveUpstreams(path, aps("[fd00::13]:6443")); err != nil {
		t.Fatal(err)
	}
	if want := aps("[fd00::1]:6443", "[fd00::13]:6443"); !slices.Equal(f.Check(), want) || !slices.Equal(got, want) {
		t.Errorf("applied %v, want %v", got, want)
	}
}

// TestFollowerRun: the polling loop picks up a new file within a few
// intervals and stops with its context.
func TestFollowerRun(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.json")
	ch := make(chan []netip.AddrPort, 4)
	f := &Follower{Path: path, Seeds: aps("192.0.2.1:6443"), Interval: 20 * time.Millisecond,
		Apply: func(ups []netip.AddrPort) error { ch <- ups; return nil }, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	time.Sleep(50 * time.Millisecond)
	if err := nllb.SaveUpstreams(path, aps("10.0.0.11:6443")); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-ch:
		if want := aps("10.0.0.11:6443", "192.0.2.1:6443"); !slices.Equal(got, want) {
			t.Errorf("applied %v, want %v", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the new file was not applied")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestWriterFollowsSlices (fake clientset): the writer puts the ready
// endpoints of its family into the file (no seed: the node adds its own),
// follows an edit, keeps the file when nothing is ready, and puts the set
// back when the file is removed (resync).
func TestWriterFollowsSlices(t *testing.T) {
	path := filepath.Join(t.TempDir(), "herald", "nllb-upstreams.json")
	name, port := "https", int32(6443)
	yes, no := true, false
	mk := func(ready map[string]bool) *discoveryv1.EndpointSlice {
		s := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: "default", Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &name, Port: &port}},
		}
		for ip, r := range ready {
			c := &no
			if r {
				c = &yes
			}
			s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: c}})
		}
		return s
	}
	cs := fake.NewClientset(mk(map[string]bool{"10.0.0.11": true, "10.0.0.12": false}))
	reg := prometheus.NewRegistry()
	met, err := NewMetrics(reg, SourceFeed)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	w := &Writer{Client: cs, Path: path, Resync: 100 * time.Millisecond, Metrics: met,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	file := func() string {
		ups, err := nllb.LoadUpstreams(path)
		if err != nil {
			return err.Error()
		}
		return fmt.Sprint(ups)
	}
	wait := func(what, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for file() != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: file %s, want %s; logs:\n%s", what, file(), want, logs.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("first list", "[10.0.0.11:6443]")
	if _, err := cs.DiscoveryV1().EndpointSlices("default").Update(ctx, mk(map[string]bool{"10.0.0.11": true, "10.0.0.12": true}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("an endpoint ready", "[10.0.0.11:6443 10.0.0.12:6443]")
	if _, err := cs.DiscoveryV1().EndpointSlices("default").Update(ctx, mk(map[string]bool{"10.0.0.11": false}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for logs.Count("no ready endpoint") == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if got := file(); got != "[10.0.0.11:6443 10.0.0.12:6443]" {
		t.Errorf("nothing ready: file %s, want the last set", got)
	}
	if _, err := cs.DiscoveryV1().EndpointSlices("default").Update(ctx, mk(map[string]bool{"10.0.0.13": true}), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait("a new server", "[10.0.0.13:6443]")
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	wait("the removed file put back by the resync", "[10.0.0.13:6443]")
	// The count follows the rename.
	for deadline := time.Now().Add(5 * time.Second); testutil.ToFloat64(met.updates) < 4 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if got := testutil.ToFloat64(met.updates); got != 4 {
		t.Errorf("writes counted: %v, want 4 (the first, two edits, the resync after the removal)", got)
	}
	if n := logs.Count("wrote the API servers"); n != 4 {
		t.Errorf("%d write lines logged, want 4; logs:\n%s", n, logs.String())
	}
}

// TestFollowerSeedsFunc: seeds that change (a re-resolved server name)
// are merged again at the next read, with the file unchanged, and with no
// file at all (the seeds alone).
func TestFollowerSeedsFunc(t *testing.T) {
	path := filepath.Join(t.TempDir(), "u.json")
	seeds := aps("192.0.2.1:6443")
	var got []netip.AddrPort
	f := &Follower{Path: path, SeedsFunc: func() []netip.AddrPort { return seeds }, Current: aps("192.0.2.1:6443"),
		Apply: func(ups []netip.AddrPort) error { got = ups; return nil }, Logger: slog.New(slog.DiscardHandler)}
	if f.Check() != nil {
		t.Fatalf("no file, same seeds: applied %v", got)
	}
	seeds = aps("192.0.2.2:6443")
	if want := aps("192.0.2.2:6443"); !slices.Equal(f.Check(), want) {
		t.Errorf("no file, the seed moved: applied %v, want %v", got, want)
	}
	if err := nllb.SaveUpstreams(path, aps("10.0.0.11:6443")); err != nil {
		t.Fatal(err)
	}
	if want := aps("10.0.0.11:6443", "192.0.2.2:6443"); !slices.Equal(f.Check(), want) {
		t.Errorf("the file: applied %v, want %v", got, want)
	}
	if f.Check() != nil {
		t.Error("nothing changed: applied again")
	}
	seeds = aps("192.0.2.3:6443", "192.0.2.4:6443")
	if want := aps("10.0.0.11:6443", "192.0.2.3:6443", "192.0.2.4:6443"); !slices.Equal(f.Check(), want) {
		t.Errorf("the file unchanged, the seeds moved: applied %v, want %v", got, want)
	}
	if f.Check() != nil {
		t.Error("nothing changed since: applied again")
	}
}
