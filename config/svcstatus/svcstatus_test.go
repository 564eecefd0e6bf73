package svcstatus

import (
	"reflect"
	"testing"
)

func TestSharingRoundTrip(t *testing.T) {
	for _, s := range []Sharing{
		{Key: "k", Ports: []string{"TCP/80", "TCP/443"}},
		{Key: `odd "key", ports TCP/1, externalTrafficPolicy Local`, Ports: []string{"UDP/53"}},
		{Key: "k", Ports: []string{"SCTP/9"}, Local: true, Selector: "app=web,tier in (a,b)"},
		{Key: "k", Local: true},
	} {
		msg := FormatSharing(s)
		got, err := ParseSharing(msg)
		if err != nil {
			t.Errorf("%q: %v", msg, err)
			continue
		}
		if len(got.Ports) == 0 {
			got.Ports = nil
		}
		if !reflect.DeepEqual(got, s) {
			t.Errorf("%q read back as %+v, want %+v", msg, got, s)
		}
	}
	for _, bad := range []string{"", "sharing key k, ports TCP/80, externalTrafficPolicy Cluster", `sharing key "k", ports TCP/x, externalTrafficPolicy Cluster`,
		`sharing key "k", ports TCP/80, externalTrafficPolicy Local`, `sharing key "k", ports TCP/80`} {
		if s, err := ParseSharing(bad); err == nil {
			t.Errorf("%q read as %+v, want an error", bad, s)
		}
	}
}

func FuzzParseSharing(f *testing.F) {
	f.Add(`sharing key "k", ports TCP/80 TCP/443, externalTrafficPolicy Cluster`)
	f.Add(`sharing key "k", ports UDP/53, externalTrafficPolicy Local, pod selector "app=web"`)
	f.Fuzz(func(t *testing.T, msg string) {
		s, err := ParseSharing(msg)
		if err != nil {
			return
		}
		again, err := ParseSharing(FormatSharing(s))
		if err != nil || !reflect.DeepEqual(again.Key, s.Key) || again.Local != s.Local || again.Selector != s.Selector || len(again.Ports) != len(s.Ports) {
			t.Fatalf("%q: %+v formats to something read as %+v (%v)", msg, s, again, err)
		}
	})
}
