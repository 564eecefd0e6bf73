package configobjs

import (
	"errors"
	"testing"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

func TestDecodeNamesTheField(t *testing.T) {
	const status = `"status":{"lastValidSpec":{"myASN":64500,"peerASN":64501,"peerAddress":"10.0.0.1"},"lastValidGeneration":3}`
	tests := []struct {
		name       string
		kind, raw  string
		field      string // "" with ok
		ok         bool
		keepStatus bool
	}{
		{"readable", config.KindBGPPeer, `{"metadata":{"name":"p"},"spec":{"myASN":64500,"peerASN":64501,"peerAddress":"10.0.0.1","holdTime":"90s"}}`, "", true, false},
		{"hold time without unit", config.KindBGPPeer, `{"metadata":{"name":"p"},"spec":{"myASN":64500,"peerASN":64501,"peerAddress":"10.0.0.1","holdTime":"90"},` + status + `}`, "spec.holdTime", false, true},
		{"4-byte ASN above uint32", config.KindBGPPeer, `{"metadata":{"name":"p"},"spec":{"myASN":4294967296,"peerASN":64501,"peerAddress":"10.0.0.1"}}`, "spec.myASN", false, false},
		{"negative local preference", config.KindBGPAdvertisement, `{"metadata":{"name":"a"},"spec":{"localPref":-1}}`, "spec.localPref", false, false},
		{"string where a list is", config.KindIPAddressPool, `{"metadata":{"name":"a"},"spec":{"addresses":"10.0.0.0/24"}}`, "spec.addresses", false, false},
		{"spec not an object", config.KindL2Advertisement, `{"metadata":{"name":"a"},"spec":"x"}`, "spec", false, false},
		{"unreadable status too", config.KindBGPPeer, `{"metadata":{"name":"p"},"spec":{"myASN":-5},"status":{"lastValidGeneration":"x"}}`, "spec.myASN", false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj, err := DecodeJSON(tc.kind, []byte(tc.raw))
			if tc.ok {
				if err != nil {
					t.Fatalf("error %v", err)
				}
				return
			}
			var ue *UnreadableError
			if !errors.As(err, &ue) {
				t.Fatalf("error %v, want an UnreadableError", err)
			}
			if ue.Field != tc.field || ue.Name == "" {
				t.Errorf("field %q name %q, want %q: %v", ue.Field, ue.Name, tc.field, err)
			}
			if obj == nil || obj.GetName() == "" {
				t.Fatalf("object %v: want the metadata read", obj)
			}
			if p, ok := obj.(*v1beta1.BGPPeer); ok && (p.Status.LastValidSpec != nil) != tc.keepStatus {
				t.Errorf("last valid spec %v, want kept=%v", p.Status.LastValidSpec, tc.keepStatus)
			}
		})
	}
}

func TestAddMarksUnreadable(t *testing.T) {
	var objs config.Objects
	good, err := DecodeJSON(config.KindBGPPeer, []byte(`{"metadata":{"name":"good"},"spec":{"myASN":1,"peerASN":2,"peerAddress":"10.0.0.1"}}`))
	if err != nil {
		t.Fatal(err)
	}
	bad, badErr := DecodeJSON(config.KindBGPPeer, []byte(`{"metadata":{"name":"bad"},"spec":{"myASN":1,"peerASN":2,"peerAddress":"10.0.0.2","holdTime":"90"}}`))
	if err := Add(&objs, good, nil); err != nil {
		t.Fatal(err)
	}
	if err := Add(&objs, bad, badErr); err != nil {
		t.Fatal(err)
	}
	if len(objs.Peers) != 2 {
		t.Fatalf("peers %d, want both listed", len(objs.Peers))
	}
	u, ok := objs.Unreadable[config.ObjectRef{Kind: config.KindBGPPeer, Name: "bad"}]
	if !ok || u.Field != "spec.holdTime" || len(objs.Unreadable) != 1 {
		t.Fatalf("unreadable %v, want only bad at spec.holdTime", objs.Unreadable)
	}
	res := config.ParseKeepingLastValid(objs)
	if len(res.Config.Peers) != 1 || res.Config.Peers[0].Name != "good" {
		t.Errorf("served peers %v, want good alone", res.Config.Peers)
	}
}
