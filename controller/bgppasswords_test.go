package controller

import (
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
		{"two peers share a Secret", []peerSecret{{"a", "good"}, {"b", "good"}},
			map[string][]byte{"a": []byte("s3cret"), "b": []byte("s3cret")}, map[string]string{}},
		{"each bad Secret costs only its peer",
			[]peerSecret{{"a", "good"}, {"b", "opaque"}, {"c", "empty"}, {"d", "gone"}, {"e", "broken"}},
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
