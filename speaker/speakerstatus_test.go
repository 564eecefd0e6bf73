package speaker

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/announce/bfd"
	"github.com/herald-lb/herald/config/v1beta1"
)

func TestBuildSpeakerStatus(t *testing.T) {
	r1, r2, r3 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("2001:db8::1")
	sess := func(name string, addr netip.Addr, est bool, state string, prefixes int, profile string) bgpSession {
		return bgpSession{bgpPeerInfo: bgpPeerInfo{name: name, prefixes: prefixes, bfdProfile: profile},
			addr: addr, established: est, state: state}
	}
	for _, tc := range []struct {
		name     string
		counts   speakerCounts
		sessions []bgpSession
		bfd      map[netip.Addr]bfd.State
		want     v1beta1.SpeakerStatusStatus
	}{
		{name: "no sessions", counts: speakerCounts{members: 3, l2: 7},
			want: v1beta1.SpeakerStatusStatus{Node: "n1", Members: 3, L2Addresses: 7}},
		{
			name:   "sorted by peer, then address; states named as in RFC 4271",
			counts: speakerCounts{members: 1},
			sessions: []bgpSession{
				sess("zeta", r1, false, "active", 2, ""),
				sess("alpha", r3, true, "established", 5, ""),
				sess("alpha", r2, false, "opensent", 5, ""),
			},
			want: v1beta1.SpeakerStatusStatus{Node: "n1", Members: 1, BGPSessions: []v1beta1.SpeakerBGPSession{
				{Peer: "alpha", Address: "192.0.2.2", State: "OpenSent", Prefixes: 5},
				{Peer: "alpha", Address: "2001:db8::1", Established: true, State: "Established", Prefixes: 5},
				{Peer: "zeta", Address: "192.0.2.1", State: "Active", Prefixes: 2},
			}},
		},
		{
			name: "no state name: established or not",
			sessions: []bgpSession{
				sess("a", r1, true, "", 0, ""),
				sess("b", r2, false, "", 0, ""),
			},
			want: v1beta1.SpeakerStatusStatus{Node: "n1", BGPSessions: []v1beta1.SpeakerBGPSession{
				{Peer: "a", Address: "192.0.2.1", Established: true, State: "Established"},
				{Peer: "b", Address: "192.0.2.2", State: "NotEstablished"},
			}},
		},
		{
			name: "BFD: Up, Down for every other state and while missing, empty without BFD",
			sessions: []bgpSession{
				sess("up", r1, true, "established", 1, "fast"),
				sess("init", r2, false, "idle", 1, "fast"),
				sess("missing", r3, false, "idle", 1, "fast"),
				sess("none", netip.MustParseAddr("192.0.2.9"), true, "established", 1, ""),
				sess("unnamed", netip.MustParseAddr("192.0.2.10"), true, "established", 1, ""),
			},
			bfd: map[netip.Addr]bfd.State{r1: bfd.StateUp, r2: bfd.StateInit,
				netip.MustParseAddr("192.0.2.10"): bfd.StateAdminDown},
			want: v1beta1.SpeakerStatusStatus{Node: "n1", BGPSessions: []v1beta1.SpeakerBGPSession{
				{Peer: "init", Address: "192.0.2.2", State: "Idle", Prefixes: 1, BFD: "Down"},
				{Peer: "missing", Address: "2001:db8::1", State: "Idle", Prefixes: 1, BFD: "Down"},
				{Peer: "none", Address: "192.0.2.9", Established: true, State: "Established", Prefixes: 1},
				{Peer: "unnamed", Address: "192.0.2.10", Established: true, State: "Established", Prefixes: 1, BFD: "Down"},
				{Peer: "up", Address: "192.0.2.1", Established: true, State: "Established", Prefixes: 1, BFD: "Up"},
			}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := buildSpeakerStatus("n1", tc.counts, tc.sessions, tc.bfd)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDiffSpeakerStatus(t *testing.T) {
	base := func() v1beta1.SpeakerStatusStatus {
		return v1beta1.SpeakerStatusStatus{Node: "n1", Members: 3, L2Addresses: 2, BGPSessions: []v1beta1.SpeakerBGPSession{
			{Peer: "a", Address: "192.0.2.1", Established: true, State: "Established", Prefixes: 4, BFD: "Up"},
			{Peer: "b", Address: "192.0.2.2", State: "Active", Prefixes: 4},
		}}
	}
	for _, tc := range []struct {
		name   string
		change func(*v1beta1.SpeakerStatusStatus)
		want   speakerStatusChange
	}{
		{"same", func(*v1beta1.SpeakerStatusStatus) {}, speakerStatusSame},
		{"members", func(s *v1beta1.SpeakerStatusStatus) { s.Members = 4 }, speakerStatusCounts},
		{"l2 addresses", func(s *v1beta1.SpeakerStatusStatus) { s.L2Addresses = 0 }, speakerStatusCounts},
		{"prefixes", func(s *v1beta1.SpeakerStatusStatus) { s.BGPSessions[1].Prefixes = 9 }, speakerStatusCounts},
		{"prefixes and state", func(s *v1beta1.SpeakerStatusStatus) {
			s.BGPSessions[0].Prefixes = 9
			s.BGPSessions[1].State = "Established"
		}, speakerStatusState},
		{"counts and state", func(s *v1beta1.SpeakerStatusStatus) {
			s.Members = 9
			s.BGPSessions[1].Established = true
		}, speakerStatusState},
		{"session state", func(s *v1beta1.SpeakerStatusStatus) { s.BGPSessions[1].State = "Connect" }, speakerStatusState},
		{"established", func(s *v1beta1.SpeakerStatusStatus) { s.BGPSessions[0].Established = false }, speakerStatusState},
		{"bfd", func(s *v1beta1.SpeakerStatusStatus) { s.BGPSessions[0].BFD = "Down" }, speakerStatusState},
		{"session gone", func(s *v1beta1.SpeakerStatusStatus) { s.BGPSessions = s.BGPSessions[:1] }, speakerStatusState},
		{"session replaced", func(s *v1beta1.SpeakerStatusStatus) { s.BGPSessions[1].Address = "192.0.2.3" }, speakerStatusState},
		{"peer renamed", func(s *v1beta1.SpeakerStatusStatus) { s.BGPSessions[1].Peer = "c" }, speakerStatusState},
		{"node", func(s *v1beta1.SpeakerStatusStatus) { s.Node = "n2" }, speakerStatusState},
	} {
		t.Run(tc.name, func(t *testing.T) {
			last, want := base(), base()
			tc.change(&want)
			if got := diffSpeakerStatus(last, want); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
			if got := diffSpeakerStatus(want, last); got != tc.want {
				t.Errorf("the other way round: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSpeakerStatusWriteDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const state, counts = time.Second, 30 * time.Second
	started := t0.Add(-time.Hour) // the first sync's counts arrived
	for _, tc := range []struct {
		name      string
		change    speakerStatusChange
		lastWrite time.Time
		now       time.Time
		due       bool
		wait      time.Duration
	}{
		{"nothing changed", speakerStatusSame, t0, t0.Add(time.Hour), false, 0},
		{"nothing changed, never written", speakerStatusSame, time.Time{}, t0, false, 0},
		{"never written: state", speakerStatusState, time.Time{}, t0, true, 0},
		{"never written: counts too are due a second after the first sync", speakerStatusCounts, time.Time{}, t0, true, 0},
		{"never written, just started: the first syncs settle", speakerStatusState, time.Time{}, started.Add(400 * time.Millisecond), false, 600 * time.Millisecond},
		{"never written, just started: counts wait as long as a state change", speakerStatusCounts, time.Time{}, started.Add(400 * time.Millisecond), false, 600 * time.Millisecond},
		{"state, just written", speakerStatusState, t0, t0.Add(300 * time.Millisecond), false, 700 * time.Millisecond},
		{"state, a second after", speakerStatusState, t0, t0.Add(time.Second), true, 0},
		{"state, long after", speakerStatusState, t0, t0.Add(time.Hour), true, 0},
		{"counts, a second after", speakerStatusCounts, t0, t0.Add(time.Second), false, 29 * time.Second},
		{"counts, 29.9 s after", speakerStatusCounts, t0, t0.Add(29900 * time.Millisecond), false, 100 * time.Millisecond},
		{"counts, 30 s after", speakerStatusCounts, t0, t0.Add(30 * time.Second), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, wait := speakerStatusWriteDue(tc.change, tc.lastWrite, started, tc.now, state, counts)
			if due != tc.due || wait != tc.wait {
				t.Errorf("got due %v wait %v, want due %v wait %v", due, wait, tc.due, tc.wait)
			}
		})
	}
}

// A missing object, another owner (a previous Pod's) or other labels are
// written at once, as a state change.
func TestSpeakerStatusChangeOf(t *testing.T) {
	a := &Agent{o: Options{NodeName: strings.Repeat("n", 70), Namespace: "herald-system", PodName: "speaker-x", PodUID: "uid-2"}}
	st := v1beta1.SpeakerStatusStatus{Node: a.o.NodeName, Members: 2}
	want := a.speakerStatusObject(st)
	if got := want.Labels[v1beta1.LabelNode]; len(got) > 63 || got != nodeLabelValue(a.o.NodeName) {
		t.Fatalf("label %q: want nodeLabelValue of the node's name", got)
	}
	if want.Name != a.o.NodeName || want.Namespace != "herald-system" {
		t.Fatalf("named %s/%s", want.Namespace, want.Name)
	}
	same := want.DeepCopy()
	counts := want.DeepCopy()
	counts.Status.Members = 3
	oldOwner := want.DeepCopy()
	oldOwner.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "speaker-old", UID: "uid-1"}}
	noLabel := want.DeepCopy()
	noLabel.Labels = nil
	for _, tc := range []struct {
		name string
		cur  *v1beta1.SpeakerStatus
		want speakerStatusChange
	}{
		{"missing", nil, speakerStatusState},
		{"same", same, speakerStatusSame},
		{"counts", counts, speakerStatusCounts},
		{"old owner", oldOwner, speakerStatusState},
		{"no label", noLabel, speakerStatusState},
	} {
		if got := speakerStatusChangeOf(tc.cur, want); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSpeakerStatusBackoff(t *testing.T) {
	var got []time.Duration
	d := time.Duration(0)
	for range 9 {
		d = speakerStatusBackoff(d)
		got = append(got, d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute, time.Minute}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
