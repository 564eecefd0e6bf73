package controller

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Every configuration kind the controller reads gets a Valid condition and
// a last valid spec: configObjects lists each object of each kind.
func TestConfigObjectsCoverEveryKind(t *testing.T) {
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name, Generation: 4} }
	ms := uint32(50)
	objs := config.Objects{
		Pools:             []v1beta1.IPAddressPool{{ObjectMeta: meta("pool")}},
		L2Advertisements:  []v1beta1.L2Advertisement{{ObjectMeta: meta("l2")}},
		BGPAdvertisements: []v1beta1.BGPAdvertisement{{ObjectMeta: meta("bgp")}},
		Peers:             []v1beta1.BGPPeer{{ObjectMeta: meta("peer")}},
		Communities:       []v1beta1.Community{{ObjectMeta: meta("comm")}},
		BFDProfiles:       []v1beta1.BFDProfile{{ObjectMeta: meta("fast"), Spec: v1beta1.BFDProfileSpec{ReceiveInterval: &ms}}},
	}
	got := configObjects(objs)
	types := map[reflect.Type]string{}
	for _, o := range got {
		types[reflect.TypeOf(o.obj)] = o.kind
	}
	for _, kind := range config.Kinds {
		k := configobjs.New(kind)
		if _, ok := types[reflect.TypeOf(k)]; !ok {
			t.Errorf("configObjects lists no %T: that kind would get no Valid condition", k)
		}
	}
	if len(got) != len(config.Kinds) {
		t.Errorf("configObjects gave %d objects for %d", len(got), len(config.Kinds))
	}
	for _, o := range got {
		if o.kind != config.KindBFDProfile {
			continue
		}
		if !o.recordLastValid() {
			t.Fatal("BFDProfile: recording the last valid spec changed nothing")
		}
		p := &objs.BFDProfiles[0]
		if p.Status.LastValidSpec == nil || *p.Status.LastValidSpec.ReceiveInterval != 50 || o.lastValidGeneration() != 4 {
			t.Fatalf("BFDProfile status after record: %+v", p.Status)
		}
		if o.recordLastValid() {
			t.Error("BFDProfile: recording the same spec twice changed something")
		}
		if !setCondition(o.conds, validCondition(config.ObjectState{Serving: config.ServingCurrent}, 4, 4)) || len(p.Status.Conditions) != 1 {
			t.Errorf("BFDProfile: the Valid condition was not set: %+v", p.Status.Conditions)
		}
	}
}
