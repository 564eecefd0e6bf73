package main

import (
	"io"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/herald-lb/herald/speaker/members"
)

func TestSpeakerFlags(t *testing.T) {
	env := map[string]string{"NODE_NAME": "n1", "POD_NAMESPACE": "lb", "POD_IP": "10.0.0.5", "POD_NAME": "speaker-x", "POD_UID": "uid-1"}
	getenv := func(k string) string { return env[k] }

	f, err := parseSpeakerFlags(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o := f.o
	if o.NodeName != "n1" || o.Namespace != "lb" || o.MemberlistBindAddr != netip.MustParseAddr("10.0.0.5") ||
		o.PodName != "speaker-x" || o.PodUID != "uid-1" || o.Profile != members.ProfileFast ||
		o.MemberlistPort != 7946 || o.MetricsAddr != ":7572" || o.ProbeAddr != ":7573" || o.MemberlistInsecure ||
		o.NLLBStateFile != "" || o.NLLBFamily != "auto" {
		t.Errorf("defaults from the environment: %+v", o)
	}

	f, err = parseSpeakerFlags([]string{"--node-name", "n2", "--memberlist-profile", "default",
		"--memberlist-tunables", "ProbeInterval=300ms", "--l2-exclude-interfaces", "eth9, wg*",
		"--memberlist-bind-address", "fd00::5", "--memberlist-insecure",
		"--nllb-state-file", "/var/lib/herald/nllb-upstreams.json", "--nllb-ip-family", "ipv6"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	o = f.o
	if o.NodeName != "n2" || o.Profile != members.ProfileDefault || o.Tunables.ProbeInterval != 300*time.Millisecond ||
		!reflect.DeepEqual(o.ExcludeInterfaces, []string{"eth9", "wg*"}) || o.MemberlistBindAddr != netip.MustParseAddr("fd00::5") ||
		!o.MemberlistInsecure || o.NLLBStateFile != "/var/lib/herald/nllb-upstreams.json" || o.NLLBFamily != "ipv6" {
		t.Errorf("flags: %+v", o)
	}

	for _, tc := range []struct {
		args []string
		env  map[string]string
		err  string
	}{
		{nil, nil, "--node-name (or NODE_NAME) is required"},
		{[]string{"--memberlist-profile", "turbo"}, env, "neither fast nor default"},
		{[]string{"--memberlist-tunables", "Bogus=1"}, env, "--memberlist-tunables"},
		{[]string{"--memberlist-bind-address", "nope"}, env, "--memberlist-bind-address"},
		{[]string{"extra"}, env, "unexpected arguments"},
		{[]string{"--nllb-ip-family", "both"}, env, "--nllb-ip-family"},
	} {
		_, err := parseSpeakerFlags(tc.args, func(k string) string { return tc.env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%q: error %v, want %q", tc.args, err, tc.err)
		}
	}
}
