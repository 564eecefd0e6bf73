package controller

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
)

// EventPasswordSecretInvalid is the Warning on a BGPPeer whose
// passwordSecret cannot be copied for the speakers.
const EventPasswordSecretInvalid = "PasswordSecretInvalid"

// peerSecret is a BGPPeer and where its password is: the Secret its
// spec.passwordSecret names, or inline in spec.password.
type peerSecret struct {
	peer   string
	secret string
	inline string
}

// passwordSource reads where a BGPPeer (as stored, unstructured) keeps its
// password, with config.Parse's rules: spec.password, or a passwordSecret
// naming a Secret in the peer's own namespace. A peer with neither, or
// with one Parse refuses (both set, another namespace), has none here: its
// Valid condition says why.
func passwordSource(p *unstructured.Unstructured) (peerSecret, bool) {
	inline, _, _ := unstructured.NestedString(p.Object, "spec", "password")
	name, _, _ := unstructured.NestedString(p.Object, "spec", "passwordSecret", "name")
	ns, _, _ := unstructured.NestedString(p.Object, "spec", "passwordSecret", "namespace")
	switch {
	case inline != "" && name == "":
		return peerSecret{peer: p.GetName(), inline: inline}, true
	case inline == "" && name != "" && (ns == "" || ns == p.GetNamespace()):
		return peerSecret{peer: p.GetName(), secret: name}, true
	}
	return peerSecret{}, false
}

// passwordData is the content of the speakers' password copy: for each
// peer with a password, the password (inline, or the Secret's) under the
// peer's name. A Secret that is missing, of another type than
// kubernetes.io/basic-auth, or without a password is left out with a
// problem naming the peer and why (the speakers then leave the session out,
// as for a missing Secret). Pure: get reads the install namespace's Secrets.
func passwordData(peers []peerSecret, get func(name string) (*corev1.Secret, error)) (map[string][]byte, map[string]string) {
	data := map[string][]byte{}
	problems := map[string]string{}
	for _, p := range peers {
		if p.secret == "" {
			data[p.peer] = []byte(p.inline)
			continue
		}
		s, err := get(p.secret)
		switch {
		case apierrors.IsNotFound(err):
			problems[p.peer] = fmt.Sprintf("Secret %s does not exist", p.secret)
		case err != nil:
			problems[p.peer] = fmt.Sprintf("Secret %s: %v", p.secret, err)
		case s.Type != corev1.SecretTypeBasicAuth:
			problems[p.peer] = fmt.Sprintf("Secret %s is of type %q, want %s", p.secret, s.Type, corev1.SecretTypeBasicAuth)
		case len(s.Data[v1beta1.BGPPasswordKey]) == 0:
			problems[p.peer] = fmt.Sprintf("Secret %s has no %q", p.secret, v1beta1.BGPPasswordKey)
		default:
			data[p.peer] = s.Data[v1beta1.BGPPasswordKey]
		}
	}
	return data, problems
}

// passwordSecretsOnly is the controller's cache transform of Secrets: it
// keeps the data of the Secrets a BGPPeer's password can come from (type
// kubernetes.io/basic-auth) and of the copy (name), and drops every other
// Secret's data and every managedFields, so the cache of the install
// namespace holds no Helm release, no webhook key, nothing it does not use.
func passwordSecretsOnly(name string) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return obj, nil
		}
		s.ManagedFields = nil
		if s.Type != corev1.SecretTypeBasicAuth && s.Name != name {
			s.Data, s.StringData = nil, nil
		}
		return s, nil
	}
}

// bgpPasswords keeps the speakers' password copy (one Secret in the
// install namespace, a key per BGPPeer) equal to what the BGPPeers'
// passwordSecrets hold. It runs on the leader, from the cache (BGPPeers as
// unstructured objects, so one unreadable peer costs only itself; Secrets of
// the install namespace), on every change of either.
type bgpPasswords struct {
	r    *Reconciler
	name string
	// warned is the problem last reported per peer: an event is written
	// when it changes, not on every Secret event of the namespace.
	warned map[string]string
}

// passwordsKey is the one request the password reconciler handles.
var passwordsKey = reconcile.Request{NamespacedName: types.NamespacedName{Name: "bgp-passwords"}}

func (b *bgpPasswords) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	r := b.r
	var peers unstructured.UnstructuredList
	peers.SetGroupVersionKind(configobjs.GVK(config.KindBGPPeer + "List"))
	if err := r.cache.List(ctx, &peers, client.InNamespace(r.namespace)); err != nil {
		return reconcile.Result{}, fmt.Errorf("listing BGPPeers: %w", err)
	}
	var refs []peerSecret
	byName := map[string]*unstructured.Unstructured{}
	for i := range peers.Items {
		p := &peers.Items[i]
		if ref, ok := passwordSource(p); ok {
			refs = append(refs, ref)
			byName[p.GetName()] = p
		}
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].peer < refs[j].peer })
	data, problems := passwordData(refs, func(name string) (*corev1.Secret, error) {
		var s corev1.Secret
		if err := r.cache.Get(ctx, types.NamespacedName{Namespace: r.namespace, Name: name}, &s); err != nil {
			return nil, err
		}
		return &s, nil
	})
	for _, peer := range slices.Sorted(maps.Keys(problems)) {
		if b.warned[peer] != problems[peer] {
			r.recorder.Eventf(byName[peer], nil, corev1.EventTypeWarning, EventPasswordSecretInvalid, "CopyPassword",
				"bgp peer %s: %s; the speakers leave its session out until it is fixed", peer, problems[peer])
			r.log.Warn("cannot copy a BGP password for the speakers", "bgpPeer", peer, "problem", problems[peer])
		}
	}
	b.warned = problems
	return reconcile.Result{}, b.write(ctx, data)
}

// write makes the copy hold data, creating it when missing; no write when
// it already does.
func (b *bgpPasswords) write(ctx context.Context, data map[string][]byte) error {
	r := b.r
	key := types.NamespacedName{Namespace: r.namespace, Name: b.name}
	var cur corev1.Secret
	err := r.cache.Get(ctx, key, &cur)
	switch {
	case apierrors.IsNotFound(err):
		s := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: r.namespace, Name: b.name,
				Labels: map[string]string{"app.kubernetes.io/name": "herald", "app.kubernetes.io/component": "speaker"}},
			Type: corev1.SecretTypeOpaque,
			Data: data,
		}
		if err := r.client.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating the BGP password copy %s: %w", key, err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("reading the BGP password copy %s: %w", key, err)
	}
	if sameData(cur.Data, data) {
		return nil
	}
	cur.Data = data
	if err := r.client.Update(ctx, &cur); err != nil {
		return fmt.Errorf("updating the BGP password copy %s: %w", key, err)
	}
	return nil
}

func sameData(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, bytes.Equal)
}
