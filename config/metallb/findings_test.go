package metallb

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

const peerHead = "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: p, namespace: metallb-system}\n"

func peerYAML(spec string) string {
	return peerHead + "spec: {myASN: 64512, peerASN: 64500, peerAddress: 10.0.0.1, dualStackAddressFamily: true, " + spec + "}\n"
}

// TestConvertFindings converts small inputs and checks the report's
// findings (as line prefixes) and what was written.
func TestConvertFindings(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
		// check looks at the result; nil: no check.
		check func(t *testing.T, res *Result)
	}{
		{
			name: "secret without password key",
			in:   peerYAML("passwordSecret: {name: s}") + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: metallb-system}\ntype: kubernetes.io/basic-auth\ndata: {username: dQ==}\n",
			want: []string{"not carried: BGPPeer metallb-system/p: spec.passwordSecret.name: Secret metallb-system/s: has no key password: not copied"},
			check: func(t *testing.T, res *Result) {
				if len(res.Secrets) != 0 {
					t.Errorf("copied %d Secrets", len(res.Secrets))
				}
			},
		},
		{
			name: "secret not base64",
			in:   peerYAML("passwordSecret: {name: s}") + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: metallb-system}\ntype: kubernetes.io/basic-auth\ndata: {password: '!!'}\n",
			want: []string{"not carried: BGPPeer metallb-system/p: spec.passwordSecret.name: Secret metallb-system/s: data.password is not base64"},
		},
		{
			name: "two secrets of one name",
			in: peerYAML("passwordSecret: {name: s, namespace: a}") +
				"---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: q, namespace: metallb-system}\nspec: {myASN: 64512, peerASN: 64501, peerAddress: 10.0.0.2, dualStackAddressFamily: true, passwordSecret: {name: s, namespace: b}}\n" +
				"---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: a}\ntype: kubernetes.io/basic-auth\nstringData: {password: one}\n" +
				"---\napiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: b}\ntype: kubernetes.io/basic-auth\nstringData: {password: two}\n",
			want: []string{
				"note: BGPPeer metallb-system/p: spec.passwordSecret: Secret a/s copied to herald-system/s",
				"not carried: BGPPeer metallb-system/q: spec.passwordSecret.name: Secret b/s would be copied to herald-system/s, as Secret a/s is",
			},
			check: func(t *testing.T, res *Result) {
				if len(res.Secrets) != 1 || res.Secrets[0].Object["data"].(map[string]any)["password"] != "b25l" {
					t.Errorf("Secrets %v, want the copy of a/s alone (password b25l)", res.Secrets)
				}
			},
		},
		{
			name: "one secret, two peers",
			in: peerYAML("passwordSecret: {name: s}") +
				"---\napiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: q}\nspec: {myASN: 64512, peerASN: 64501, peerAddress: 10.0.0.2, dualStackAddressFamily: true, passwordSecret: {name: s}}\n" +
				"---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/basic-auth\ndata: {password: cHc=}\n",
			want: []string{
				"note: BGPPeer metallb-system/p: spec.passwordSecret: Secret metallb-system/s copied",
				"note: BGPPeer metallb-system/q: spec.passwordSecret: Secret metallb-system/s copied",
			},
			check: func(t *testing.T, res *Result) {
				if len(res.Secrets) != 1 {
					t.Fatalf("%d copies, want 1", len(res.Secrets))
				}
				want := map[string]any{"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/basic-auth",
					"metadata": map[string]any{"name": "s", "namespace": "herald-system"}, "data": map[string]any{"password": "cHc="}}
				if !reflect.DeepEqual(res.Secrets[0].Object, want) {
					t.Errorf("copy %v, want %v", res.Secrets[0].Object, want)
				}
				for _, p := range res.Objects.Peers {
					if p.Spec.PasswordSecret == nil || p.Spec.PasswordSecret.Name != "s" || p.Spec.PasswordSecret.Namespace != "" {
						t.Errorf("peer %s: passwordSecret %+v, want name s and no namespace", p.Name, p.Spec.PasswordSecret)
					}
				}
			},
		},
		{
			name: "namespace without a name",
			in:   peerYAML("passwordSecret: {namespace: other}"),
			want: []string{"note: BGPPeer metallb-system/p: spec.passwordSecret.namespace: set without a name: no Secret"},
			check: func(t *testing.T, res *Result) {
				if res.Objects.Peers[0].Spec.PasswordSecret != nil {
					t.Errorf("passwordSecret %+v, want none", res.Objects.Peers[0].Spec.PasswordSecret)
				}
			},
		},
		{
			name: "inline password and a secret",
			in:   peerYAML("password: pw, passwordSecret: {name: s}") + "---\napiVersion: v1\nkind: Secret\nmetadata: {name: s}\ntype: kubernetes.io/basic-auth\ndata: {password: cHc=}\n",
			want: []string{"herald error: BGPPeer herald-system/p: spec.passwordSecret"},
		},
		{
			name: "refused peer fields",
			in:   peerYAML("interface: eth1, vrf: red"),
			want: []string{
				"refused: BGPPeer metallb-system/p: spec.interface: is \"eth1\"",
				"refused: BGPPeer metallb-system/p: spec.vrf: is \"red\"",
				"herald error: BGPPeer herald-system/p: spec.vrf",
			},
			check: func(t *testing.T, res *Result) {
				if s := res.Objects.Peers[0].Spec; s.Interface != "eth1" || s.VRF != "red" {
					t.Errorf("the refused fields are not written: %+v", s)
				}
			},
		},
		{
			name: "dynamicASN external",
			in:   peerHead + "spec: {myASN: 64512, dynamicASN: external, peerAddress: 10.0.0.1, dualStackAddressFamily: true}\n",
			want: []string{"note: BGPPeer metallb-system/p: spec.dynamicASN: is \"external\"", "herald error: BGPPeer herald-system/p: spec.dynamicASN"},
		},
		{
			name: "localASN and dynamicASN internal",
			in:   peerHead + "spec: {myASN: 64512, localASN: 64600, dynamicASN: internal, peerAddress: 10.0.0.1, dualStackAddressFamily: true}\n",
			check: func(t *testing.T, res *Result) {
				if !res.Report.Carried() || len(res.Report.Findings) != 0 {
					t.Errorf("report:\n%s", res.Report)
				}
				if s := res.Objects.Peers[0].Spec; s.LocalASN != 64600 || s.DynamicASN != "internal" {
					t.Errorf("spec %+v", s)
				}
			},
		},
		{
			name: "keepalive alone at a third of Herald's default",
			in:   peerYAML("keepaliveTime: 30s"),
			check: func(t *testing.T, res *Result) {
				if s := res.Objects.Peers[0].Spec; s.HoldTime != nil {
					t.Errorf("holdTime %v written; 3 x 30s is Herald's default", s.HoldTime)
				}
			},
		},
		{
			name: "wrong types",
			in:   peerHead + "spec: {myASN: many, peerASN: 64500, peerAddress: 10.0.0.1, nodeSelectors: {rack: a}}\n",
			want: []string{"not carried: BGPPeer metallb-system/p: cannot be read as Herald's BGPPeer"},
			check: func(t *testing.T, res *Result) {
				if len(res.Objects.Peers) != 0 {
					t.Errorf("a peer that cannot be read was written")
				}
			},
		},
		{
			name: "not an object where one is wanted",
			in: peerHead + "spec: {myASN: 1, peerASN: 2, peerAddress: 10.0.0.1, passwordSecret: s}\n---\n" +
				"apiVersion: metallb.io/v1beta1\nkind: Community\nmetadata: {name: c}\nspec: {communities: [a, {name: b, value: '1:2'}]}\n---\n" +
				"apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l}\nspec: {preferredNodeSelectors: {weight: 1}}\n---\n" +
				"apiVersion: metallb.io/v1beta1\nkind: BFDProfile\nmetadata: {name: b}\nspec: [1]\n",
			want: []string{
				"not carried: BGPPeer metallb-system/p: spec.passwordSecret: is a string, not an object",
				"not carried: Community metallb-system/c: spec.communities[0]: is a string, not an object",
				"not carried: L2Advertisement metallb-system/l: spec.preferredNodeSelectors: is an object, not a list",
				"not carried: BFDProfile metallb-system/b: spec: is a list, not an object",
			},
		},
		{
			name: "unknown inside a selector",
			in:   "apiVersion: metallb.io/v1beta1\nkind: L2Advertisement\nmetadata: {name: l}\nspec: {nodeSelectors: [{matchLabel: {a: b}}]}\n",
			want: []string{"unknown field: L2Advertisement metallb-system/l: spec.nodeSelectors[0].matchLabel: not a field of spec.nodeSelectors"},
		},
		{
			name: "unknown top-level field and kind",
			in: "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: x}\nspec: {addresses: [10.0.0.0/24]}\nspce: {}\n---\n" +
				"apiVersion: metallb.io/v1beta2\nkind: IPAddressPool\nmetadata: {name: why}\n---\n" +
				"apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nspec: {}\n",
			want: []string{
				"unknown field: IPAddressPool metallb-system/x: spce: not a field of a Kubernetes object",
				"not carried: IPAddressPool metallb-system/why: IPAddressPool is not a kind of MetalLB's API (metallb.io/v1beta2)",
				"not carried: IPAddressPool metallb-system/(no name): metadata.name: missing",
			},
		},
		{
			name: "the same object twice",
			in:   "apiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: x}\nspec: {addresses: [10.0.0.0/24]}\n---\napiVersion: metallb.io/v1beta1\nkind: IPAddressPool\nmetadata: {name: x, uid: u}\nspec: {addresses: [10.0.0.0/24]}\n",
			want: []string{"note: IPAddressPool metallb-system/x: given twice with the same spec: carried once"},
		},
		{
			name: "a ConfigMap beside what MetalLB writes",
			in: "apiVersion: metallb.io/v1beta1\nkind: ServiceL2Status\nmetadata: {name: s}\n---\n" +
				"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config}\ndata:\n  config: |\n    address-pools: [{name: old, protocol: layer2, addresses: [10.20.0.0/24]}]\n",
			check: func(t *testing.T, res *Result) {
				if len(res.Objects.Pools) != 1 || res.Objects.Pools[0].Name != "old" {
					t.Errorf("pools %v, want the ConfigMap's", res.Objects.Pools)
				}
			},
		},
		{
			name: "nothing",
			in:   "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: default}\n",
			want: []string{"note: Service (v1) default/s: not MetalLB configuration: skipped", "note: input: no MetalLB configuration objects found"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ReadObjects(strings.NewReader(tc.in), tc.name)
			if err != nil {
				t.Fatal(err)
			}
			res := Convert(objs, Options{Namespace: "herald-system"})
			lines := strings.Split(res.Report.String(), "\n")
			for _, w := range tc.want {
				if !hasPrefixLine(lines, w) {
					t.Errorf("the report lacks %q:\n%s", w, res.Report)
				}
			}
			if tc.check != nil {
				tc.check(t, res)
			}
		})
	}
}

func TestPasswordSecrets(t *testing.T) {
	in := peerYAML("passwordSecret: {name: s}") + "---\n" +
		"apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: q}\nspec: {passwordSecret: {name: t}}\n---\n" +
		"apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: v}\nspec: {passwordSecret: {}}\n---\n" +
		"apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: w}\nspec: {passwordSecret: {name: s, namespace: metallb-system}}\n---\n" +
		"apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: x}\nspec: {passwordSecret: {namespace: kube-system}}\n"
	objs, err := ReadObjects(strings.NewReader(in), "in")
	if err != nil {
		t.Fatal(err)
	}
	got, err := PasswordSecrets(objs, "metallb-system")
	want := []types.NamespacedName{{Namespace: "metallb-system", Name: "s"}, {Namespace: "metallb-system", Name: "t"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("PasswordSecrets = %v, %v; want %v", got, err, want)
	}
}

// TestPasswordSecretsRefusesOtherNamespaces: migrate --from-cluster reads
// the Secrets with the operator's credentials, so a BGPPeer may not point
// it at a Secret outside MetalLB's namespace (MetalLB itself reads none
// there); the error names the peer and the namespace, and no Secret is
// returned to read.
func TestPasswordSecretsRefusesOtherNamespaces(t *testing.T) {
	const ok = "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: fine, namespace: metallb-system}\nspec: {passwordSecret: {name: s}}\n---\n"
	for _, tc := range []struct {
		name, peer string
		want       []string
	}{{
		name: "passwordSecret.namespace",
		peer: "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: tor, namespace: metallb-system}\nspec: {passwordSecret: {name: admin-token, namespace: kube-system}}\n",
		want: []string{"BGPPeer metallb-system/tor: spec.passwordSecret names namespace kube-system; only MetalLB's namespace metallb-system is read"},
	}, {
		name: "the peer's own namespace",
		peer: "apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: tor, namespace: team-a}\nspec: {passwordSecret: {name: s}}\n",
		want: []string{"BGPPeer team-a/tor: spec.passwordSecret is in the BGPPeer's namespace team-a; only MetalLB's namespace metallb-system is read"},
	}, {
		name: "v1beta1 peer, and every refused peer is named",
		peer: "apiVersion: metallb.io/v1beta1\nkind: BGPPeer\nmetadata: {name: a}\nspec: {passwordSecret: {name: s, namespace: kube-system}}\n---\n" +
			"apiVersion: metallb.io/v1beta2\nkind: BGPPeer\nmetadata: {name: b}\nspec: {passwordSecret: {name: s, namespace: default}}\n",
		want: []string{
			"BGPPeer metallb-system/a: spec.passwordSecret names namespace kube-system",
			"; BGPPeer metallb-system/b: spec.passwordSecret names namespace default;",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := ReadObjects(strings.NewReader(ok+tc.peer), "in")
			if err != nil {
				t.Fatal(err)
			}
			got, err := PasswordSecrets(objs, "metallb-system")
			if err == nil || got != nil {
				t.Fatalf("PasswordSecrets = %v, %v; want an error and nothing to read", got, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestDiffers(t *testing.T) {
	tests := []struct {
		field string
		v     any
		set   bool
		want  bool
	}{
		{"spec.dualStackAddressFamily", nil, false, true},
		{"spec.dualStackAddressFamily", false, true, true},
		{"spec.dualStackAddressFamily", true, true, false},
		{"spec.disableMP", nil, false, false},
		{"spec.disableMP", false, true, false},
		{"spec.disableMP", true, true, true},
		{"spec.echoInterval", int64(50), true, true},
		{"spec.echoInterval", int64(0), true, false},
	}
	for _, tc := range tests {
		if got := differs(tc.field, tc.v, tc.set); got != tc.want {
			t.Errorf("differs(%s, %v, %v) = %v, want %v", tc.field, tc.v, tc.set, got, tc.want)
		}
	}
}
