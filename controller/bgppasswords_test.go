package controller

import (
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestPasswordData(t *testing.T) {
	secrets := map[string]*corev1.Secret{
		"good":   {Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("s3cret"), "username": []byte("x")}},
		"opaque": {Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"password": []byte("s3cret")}},
		"empty":  {Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"username": []byte("x")}},
	}
	get := func(name string) (*corev1.Secret, error) {
		if name == "broken" {
			return nil, errors.New("connection refused")
		}
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
	}
	for _, tc := range []struct {
		name     string
		peers    []peerSecret
		data     map[string][]byte
		problems map[string]string
	}{
		{"none", nil, map[string][]byte{}, map[string]string{}},
		{"two peers share a Secret", []peerSecret{{"a", "good", ""}, {"b", "good", ""}},
			map[string][]byte{"a": []byte("s3cret"), "b": []byte("s3cret")}, map[string]string{}},
		{"inline beside a Secret", []peerSecret{{"a", "", "inl1ne"}, {"b", "good", ""}},
			map[string][]byte{"a": []byte("inl1ne"), "b": []byte("s3cret")}, map[string]string{}},
		{"each bad Secret costs only its peer",
			[]peerSecret{{"a", "good", ""}, {"b", "opaque", ""}, {"c", "empty", ""}, {"d", "gone", ""}, {"e", "broken", ""}},
			map[string][]byte{"a": []byte("s3cret")},
			map[string]string{
				"b": `Secret opaque is of type "Opaque", want kubernetes.io/basic-auth`,
				"c": `Secret empty has no "password"`,
				"d": "Secret gone does not exist",
				"e": "Secret broken: connection refused",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, problems := passwordData(tc.peers, get)
			if !sameData(data, tc.data) {
				t.Errorf("data %q, want %q", data, tc.data)
			}
			if !maps.Equal(problems, tc.problems) {
				t.Errorf("problems %q, want %q", problems, tc.problems)
			}
		})
	}
}

// TestPasswordSource: where a stored BGPPeer's password is, by config.Parse's
// rules (MetalLB's fields: inline password, passwordSecret {} and its
// namespace).
func TestPasswordSource(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec map[string]any
		want peerSecret
		ok   bool
	}{
		{"none", map[string]any{}, peerSecret{}, false},
		{"empty reference", map[string]any{"passwordSecret": map[string]any{}}, peerSecret{}, false},
		{"Secret", map[string]any{"passwordSecret": map[string]any{"name": "s"}}, peerSecret{"p", "s", ""}, true},
		{"Secret in the peer's namespace", map[string]any{"passwordSecret": map[string]any{"name": "s", "namespace": "herald-system"}},
			peerSecret{"p", "s", ""}, true},
		{"Secret in another namespace", map[string]any{"passwordSecret": map[string]any{"name": "s", "namespace": "metallb-system"}},
			peerSecret{}, false},
		{"inline", map[string]any{"password": "pw", "passwordSecret": map[string]any{}}, peerSecret{"p", "", "pw"}, true},
		{"both", map[string]any{"password": "pw", "passwordSecret": map[string]any{"name": "s"}}, peerSecret{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{Object: map[string]any{"spec": tc.spec}}
			u.SetName("p")
			u.SetNamespace("herald-system")
			got, ok := passwordSource(u)
			if got != tc.want || ok != tc.ok {
				t.Errorf("passwordSource = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// TestPasswordSecretsOnly: the controller's cache keeps the data of the Secrets a password can come from and of the
// copy, and of no other (a Helm release, the webhook's keys).
func TestPasswordSecretsOnly(t *testing.T) {
	tr := passwordSecretsOnly("herald-bgp-passwords")
	secret := func(name string, typ corev1.SecretType) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "x"}}},
			Type: typ, Data: map[string][]byte{"k": []byte("v")}}
	}
	for _, tc := range []struct {
		s    *corev1.Secret
		keep bool
	}{
		{secret("router-pw", corev1.SecretTypeBasicAuth), true},
		{secret("herald-bgp-passwords", corev1.SecretTypeOpaque), true},
		{secret("sh.helm.release.v1.herald.v1", "helm.sh/release.v1"), false},
		{secret("herald-webhook-cert", corev1.SecretTypeTLS), false},
		{secret("herald-memberlist", corev1.SecretTypeOpaque), false},
	} {
		out, err := tr(tc.s)
		if err != nil {
			t.Fatal(err)
		}
		s := out.(*corev1.Secret)
		if (s.Data != nil) != tc.keep || s.ManagedFields != nil {
			t.Errorf("%s (%s): data kept %v, managedFields %v; want data kept %v, no managedFields", s.Name, s.Type, s.Data != nil, s.ManagedFields, tc.keep)
		}
	}
}
