package ccm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	cloudprovider "k8s.io/cloud-provider"
)

func TestSwitches(t *testing.T) {
	tests := []struct {
		s           Switches
		err         error
		controllers []string
	}{
		{Switches{LoadBalancer: true, NodeLifecycle: true}, nil,
			[]string{"cloud-node-controller", "cloud-node-lifecycle-controller", HeraldController, "service-lb-controller"}},
		{Switches{LoadBalancer: true}, nil, []string{HeraldController, "service-lb-controller"}},
		{Switches{NodeLifecycle: true}, nil, []string{"cloud-node-controller", "cloud-node-lifecycle-controller"}},
		{Switches{}, ErrNothingEnabled, nil},
	}
	for _, tc := range tests {
		if err := tc.s.Validate(); !errors.Is(err, tc.err) {
			t.Errorf("%+v: Validate() = %v, want %v", tc.s, err, tc.err)
		}
		if got := tc.s.Controllers(); !slices.Equal(got, tc.controllers) {
			t.Errorf("%+v: Controllers() = %v, want %v", tc.s, got, tc.controllers)
		}
		for _, c := range []string{"cloud-node-controller", "service-lb-controller", "node-route-controller"} {
			if got, want := tc.s.Enabled(c), slices.Contains(tc.controllers, c); got != want {
				t.Errorf("%+v: Enabled(%s) = %v, want %v", tc.s, c, got, want)
			}
		}
	}
	// The startup error says what is wrong and what to do.
	msg := ErrNothingEnabled.Error()
	for _, w := range []string{"--enable-load-balancer=false", "--enable-node-lifecycle=false", "enable at least one"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q does not say %q", msg, w)
		}
	}
}

func TestCheckCloudConfig(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{{"", true}, {"  \n", true}, {"enableLoadBalancer: true", false}} {
		err := CheckCloudConfig(strings.NewReader(tc.in))
		if (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.in, err)
		}
	}
	if err := CheckCloudConfig(nil); err != nil {
		t.Error(err)
	}
}

// The provider is registered as "herald", offers each half only with its
// switch, and never Zones, Clusters, Routes or Instances.
func TestProviderRegistration(t *testing.T) {
	if !cloudprovider.IsCloudProvider(ProviderName) {
		t.Fatal("herald is not a registered cloud provider")
	}
	cloud, err := cloudprovider.InitCloudProvider(ProviderName, "")
	if err != nil {
		t.Fatal(err)
	}
	p, ok := cloud.(*Provider)
	if !ok {
		t.Fatalf("provider is a %T", cloud)
	}
	if p.ProviderName() != "herald" || p.HasClusterID() {
		t.Errorf("name %q, cluster ID %v", p.ProviderName(), p.HasClusterID())
	}
	for _, s := range []Switches{{true, true}, {true, false}, {false, true}} {
		p.SetSwitches(s)
		if _, ok := p.LoadBalancer(); ok != s.LoadBalancer {
			t.Errorf("%+v: LoadBalancer offered %v", s, ok)
		}
		if _, ok := p.InstancesV2(); ok != s.NodeLifecycle {
			t.Errorf("%+v: InstancesV2 offered %v", s, ok)
		}
		_, zones := p.Zones()
		_, clusters := p.Clusters()
		_, routes := p.Routes()
		_, inst := p.Instances()
		if zones || clusters || routes || inst {
			t.Errorf("%+v: Zones %v, Clusters %v, Routes %v, Instances %v offered", s, zones, clusters, routes, inst)
		}
	}
}
