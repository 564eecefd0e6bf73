package controller

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
)

// ensureMemberlistSecret creates the speakers' gossip key Secret with 32
// random bytes unless it already exists; an existing key is never replaced
// (that would split the speakers until they all restart).
func ensureMemberlistSecret(ctx context.Context, c client.Client, reader client.Reader, namespace, name string) (created bool, err error) {
	var s corev1.Secret
	err = reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &s)
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return false, fmt.Errorf("secret %s/%s: generating key: %w", namespace, name, err)
	}
	s = corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{"app.kubernetes.io/name": "herald", "app.kubernetes.io/component": "speaker"}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{v1beta1.MemberlistKey: key},
	}
	if err := c.Create(ctx, &s); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return false, nil // another replica won the race; keep its key
		}
		return false, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return true, nil
}
