//go:build integration

package speaker

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/config/v1beta1"
)

// fakeBFD is a BFDStatus whose sessions and events the test sets.
type fakeBFD struct {
	mu       sync.Mutex
	sessions []bfd.SessionStatus
	subs     []chan bfd.PeerEvent
}

func (f *fakeBFD) Sessions() []bfd.SessionStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]bfd.SessionStatus(nil), f.sessions...)
}

func (f *fakeBFD) Watch() (<-chan bfd.PeerEvent, func()) {
	c := make(chan bfd.PeerEvent, 16)
	f.mu.Lock()
	f.subs = append(f.subs, c)
	f.mu.Unlock()
	return c, func() {}
}

func (f *fakeBFD) send(ev bfd.PeerEvent) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.subs {
		c <- ev
	}
}

// The BFD half of the speaker: a BGPPeer's bfdProfile reaches the session
// manager's state as the profile's values (and again when the profile
// changes; not at all when the reference is removed), the BFD sessions'
// state is in the metrics, and their changes are events on the Node.
func TestBGPPlanBFD(t *testing.T) {
	e := newEnv(t)
	u := func(v uint32) *uint32 { return &v }
	na := e.ns + "-a"
	e.node(na, "127.0.0.1", nil)
	prof := &v1beta1.BFDProfile{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "fast"},
		Spec: v1beta1.BFDProfileSpec{ReceiveInterval: u(50), TransmitInterval: u(60), DetectMultiplier: u(4)}}
	e.create(prof)
	peer := &v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "router"},
		Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: "127.0.0.9", BFDProfile: "fast"}}
	e.create(peer)
	fb, fbfd := &fakeBGP{}, &fakeBFD{}
	var reg *prometheus.Registry
	a := e.startSpeaker(na, "127.0.0.1", func(o *Options) {
		o.BGP, o.BFD = fb, fbfd
		reg = o.Registerer.(*prometheus.Registry)
	})
	e.settled(a)

	profile := func() string {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		if len(fb.last.Peers) != 1 {
			return fmt.Sprintf("peers %+v", fb.last.Peers)
		}
		if p := fb.last.Peers[0].BFD; p != nil {
			return fmt.Sprintf("%v/%v x%d passive=%v", p.ReceiveInterval, p.TransmitInterval, p.DetectMultiplier, p.Passive)
		}
		return "none"
	}
	expect := func(what, want string) {
		t.Helper()
		e.eventually(10*time.Second, what, func() string {
			if got := profile(); got != want {
				return fmt.Sprintf("%q, want %q", got, want)
			}
			return ""
		})
	}
	expect("the BGPPeer's profile reaches the applier", "50ms/60ms x4 passive=false")

	var p v1beta1.BFDProfile
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(prof), &p); err != nil {
		t.Fatal(err)
	}
	passive := true
	p.Spec.DetectMultiplier, p.Spec.PassiveMode = u(3), &passive
	if err := e.c.Update(e.ctx, &p); err != nil {
		t.Fatal(err)
	}
	expect("a changed profile reaches the applier", "50ms/60ms x3 passive=true")

	// The session manager's BFD sessions: metrics and Node events.
	router := netip.MustParseAddr("127.0.0.9")
	st := bfd.SessionStatus{Peer: router, Local: netip.MustParseAddr("127.0.0.1")}
	st.State, st.TxInterval, st.DetectionTime = bfd.StateUp, 60*time.Millisecond, 200*time.Millisecond
	st.Ups, st.Downs = 2, 1
	fbfd.mu.Lock()
	fbfd.sessions = []bfd.SessionStatus{st}
	fbfd.mu.Unlock()
	e.eventually(5*time.Second, "BFD metrics", func() string {
		got := gatherBFD(t, reg)
		want := "herald_bfd_detect_time_seconds{127.0.0.9 router}=0.2 herald_bfd_session_up{127.0.0.9 router}=1 " +
			"herald_bfd_state_changes_total{127.0.0.9 router}=3 herald_bfd_tx_interval_seconds{127.0.0.9 router}=0.06"
		if got != want {
			return fmt.Sprintf("%q, want %q", got, want)
		}
		return ""
	})
	fbfd.send(bfd.PeerEvent{Peer: router, Event: bfd.Event{Old: bfd.StateInit, New: bfd.StateUp}})
	fbfd.send(bfd.PeerEvent{Peer: router, Event: bfd.Event{Old: bfd.StateUp, New: bfd.StateDown, Diag: bfd.DiagControlDetectExpired, Failure: true}})
	e.eventually(10*time.Second, "BFD events on the Node", func() string {
		up, down := nodeEvents(t, e, na, EventBFDSessionUp), nodeEvents(t, e, na, EventBFDSessionDown)
		switch {
		case !containsAny(up, "BFD session with router (127.0.0.9) is up (profile fast; transmit interval 60ms, detection time 200ms)"):
			return fmt.Sprintf("up events %q", up)
		case !containsAny(down, "BFD session with router (127.0.0.9) went down: BFD down: control detection time expired; the BGP session is reset"):
			return fmt.Sprintf("down events %q", down)
		}
		return ""
	})

	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(peer), peer); err != nil {
		t.Fatal(err)
	}
	peer.Spec.BFDProfile = ""
	if err := e.c.Update(e.ctx, peer); err != nil {
		t.Fatal(err)
	}
	expect("no profile: no BFD (the session stays)", "none")
}

// gatherBFD renders the herald_bfd_* metrics, sorted by name, with their
// label values in label name order (address, peer).
func gatherBFD(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "herald_bfd_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetValue())
			}
			// One of the two is set; the getters of the other give 0.
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out = append(out, fmt.Sprintf("%s{%s}=%v", mf.GetName(), strings.Join(labels, " "), v))
		}
	}
	return strings.Join(out, " ")
}

// nodeEvents are the notes of the events with reason on the Node.
func nodeEvents(t *testing.T, e *env, node, reason string) []string {
	t.Helper()
	l, err := e.cs.EventsV1().Events(metav1.NamespaceAll).List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range l.Items {
		if ev.Regarding.Name == node && ev.Reason == reason {
			out = append(out, ev.Note)
		}
	}
	return out
}

// Two peers' sessions going down one after the other on a node are two events, each with its own peer in its
// message and as its related object. The events library folds an event into an earlier one's series when type,
// action, reason, reporter, regarding and related object are the same, whatever the message: with no related
// object, the second peer's event was a repeat of the first's, naming the first peer.
func TestSessionEventsOfTwoPeersAreTheirOwn(t *testing.T) {
	e := newEnv(t)
	u := func(v uint32) *uint32 { return &v }
	na := e.ns + "-a"
	e.node(na, "127.0.0.1", nil)
	e.create(&v1beta1.BFDProfile{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "fast"},
		Spec: v1beta1.BFDProfileSpec{ReceiveInterval: u(50), TransmitInterval: u(60), DetectMultiplier: u(4)}})
	routers := map[string]netip.Addr{"router-a": mustAddr("127.0.0.9"), "router-b": mustAddr("127.0.0.10")}
	for name, addr := range routers {
		e.create(&v1beta1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
			Spec: v1beta1.BGPPeerSpec{MyASN: 64500, PeerASN: 64501, PeerAddress: addr.String(), BFDProfile: "fast"}})
	}
	fb, fbfd := &fakeBGP{}, &fakeBFD{}
	a := e.startSpeaker(na, "127.0.0.1", func(o *Options) { o.BGP, o.BFD = fb, fbfd })
	e.settled(a)
	e.eventually(10*time.Second, "both peers applied", func() string {
		fb.mu.Lock()
		defer fb.mu.Unlock()
		if len(fb.last.Peers) != 2 {
			return fmt.Sprintf("peers %+v", fb.last.Peers)
		}
		return ""
	})
	for _, name := range []string{"router-a", "router-b"} {
		fbfd.send(bfd.PeerEvent{Peer: routers[name], Event: bfd.Event{Old: bfd.StateUp, New: bfd.StateDown, Diag: bfd.DiagControlDetectExpired, Failure: true}})
	}
	e.eventually(10*time.Second, "a BFDSessionDown event of each peer", func() string {
		l, err := e.cs.EventsV1().Events(metav1.NamespaceAll).List(e.ctx, metav1.ListOptions{})
		if err != nil {
			return err.Error()
		}
		var got []string
		for _, ev := range l.Items {
			if ev.Regarding.Name != na || ev.Reason != EventBFDSessionDown {
				continue
			}
			related := "none"
			if ev.Related != nil {
				related = ev.Related.Kind + " " + ev.Related.Namespace + "/" + ev.Related.Name
			}
			got = append(got, related+": "+ev.Note)
		}
		slices.Sort(got)
		want := []string{
			"BGPPeer " + e.ns + "/router-a: BFD session with router-a (127.0.0.9) went down: BFD down: control detection time expired; the BGP session is reset",
			"BGPPeer " + e.ns + "/router-b: BFD session with router-b (127.0.0.10) went down: BFD down: control detection time expired; the BGP session is reset",
		}
		if !slices.Equal(got, want) {
			return fmt.Sprintf("events %q, want %q", got, want)
		}
		return ""
	})
}
