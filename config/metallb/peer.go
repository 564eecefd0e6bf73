package metallb

import (
	"encoding/base64"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/v1beta1"
)

// Secret type and key of a BGP password, in MetalLB as in Herald.
const (
	secretTypeBasicAuth = "kubernetes.io/basic-auth"
	passwordKey         = v1beta1.BGPPasswordKey
)

// peer finishes a BGPPeer's spec: its timers and its password Secret.
func (c *converter) peer(s *source, spec, seen map[string]any) {
	c.holdFromKeepalive(s, spec)
	c.passwordSecret(s, spec, seen)
}

// holdFromKeepalive writes the hold time MetalLB derives from a keepalive
// time set alone (three times it) when it is not Herald's default.
func (c *converter) holdFromKeepalive(s *source, spec map[string]any) {
	ka, ok := spec["keepaliveTime"].(string)
	if _, hold := spec["holdTime"]; !ok || hold {
		return
	}
	d, err := time.ParseDuration(ka)
	if err != nil || 3*d == config.DefaultHoldTime {
		return // a bad duration is reported when the object is decoded
	}
	spec["holdTime"] = (3 * d).String()
	c.rep.add(Note, s.display, "spec.holdTime", "not set: written as %s, three times keepaliveTime, as MetalLB derives it (Herald's default is %s)",
		3*d, config.DefaultHoldTime)
}

// passwordSecret keeps the name of a peer's password Secret (Herald's
// copy of it has the same name) and asks for the Secret; an empty
// reference is none.
func (c *converter) passwordSecret(s *source, spec, seen map[string]any) {
	ns, _ := seen["spec.passwordSecret.namespace"].(string)
	ref, _ := spec["passwordSecret"].(map[string]any)
	name, _ := ref["name"].(string)
	if name == "" {
		delete(spec, "passwordSecret")
		if ns != "" {
			c.rep.add(Note, s.display, "spec.passwordSecret.namespace", "set without a name: no Secret, as in MetalLB")
		}
		return
	}
	if ns == "" {
		ns = s.namespace
	}
	c.secrets.need(s.display, types.NamespacedName{Namespace: ns, Name: name})
}

// secretCopier copies the password Secrets peers name into Herald's
// namespace.
type secretCopier struct {
	opts   Options
	have   map[types.NamespacedName]Object
	needBy map[types.NamespacedName][]string // Secret -> the peers that name it
}

func newSecretCopier(opts Options) *secretCopier {
	return &secretCopier{opts: opts, have: map[types.NamespacedName]Object{}, needBy: map[types.NamespacedName][]string{}}
}

// given records a Secret of the input.
func (sc *secretCopier) given(o Object) {
	ns := metaString(o, "namespace")
	if ns == "" {
		ns = sc.opts.MetalLBNamespace
	}
	sc.have[types.NamespacedName{Namespace: ns, Name: metaString(o, "name")}] = o
}

// need records that a peer names a Secret.
func (sc *secretCopier) need(peer string, ref types.NamespacedName) {
	sc.needBy[ref] = append(sc.needBy[ref], peer)
}

// copies makes the copies of the Secrets the peers name, reporting on the
// peers those that cannot be made, and the Secrets given but not named.
func (sc *secretCopier) copies(rep *Report) []*unstructured.Unstructured {
	refs := make([]types.NamespacedName, 0, len(sc.needBy))
	for ref := range sc.needBy {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].String() < refs[j].String() })
	var out []*unstructured.Unstructured
	copiedFrom := map[string]types.NamespacedName{}
	for _, ref := range refs {
		peers := sc.needBy[ref]
		src, ok := sc.have[ref]
		if !ok {
			report(rep, NotCarried, peers, "spec.passwordSecret.name", "Secret %s was not given (-f or --from-cluster): copy it by hand into namespace %s, type %s, key %s",
				ref, sc.opts.Namespace, secretTypeBasicAuth, passwordKey)
			continue
		}
		if other, clash := copiedFrom[ref.Name]; clash {
			report(rep, NotCarried, peers, "spec.passwordSecret.name", "Secret %s would be copied to %s/%s, as Secret %s is: copy it by hand under another name and name that in the BGPPeer",
				ref, sc.opts.Namespace, ref.Name, other)
			continue
		}
		password, err := secretPassword(src)
		if err != nil {
			report(rep, NotCarried, peers, "spec.passwordSecret.name", "Secret %s: %v: not copied", ref, err)
			continue
		}
		if t, _ := src["type"].(string); t != secretTypeBasicAuth {
			report(rep, Note, peers, "spec.passwordSecret.name", "Secret %s has type %q, which MetalLB refuses: the copy has type %s", ref, t, secretTypeBasicAuth)
		}
		copiedFrom[ref.Name] = ref
		out = append(out, sc.secret(ref.Name, password))
		report(rep, Note, peers, "spec.passwordSecret", "Secret %s copied to %s/%s", ref, sc.opts.Namespace, ref.Name)
	}
	for ref := range sc.have {
		if _, named := sc.needBy[ref]; !named {
			rep.add(Note, objectName("Secret", ref.Namespace, ref.Name), "", "no BGPPeer names it: not copied")
		}
	}
	return out
}

func report(rep *Report, class Class, objects []string, field, format string, args ...any) {
	for _, o := range objects {
		rep.add(class, o, field, format, args...)
	}
}

// secretPassword returns the password of a Secret, base64-encoded as in
// its data.
func secretPassword(o Object) (string, error) {
	data, _ := o["data"].(map[string]any)
	if v, ok := data[passwordKey].(string); ok {
		if _, err := base64.StdEncoding.DecodeString(v); err != nil {
			return "", fmt.Errorf("data.%s is not base64: %v", passwordKey, err)
		}
		return v, nil
	}
	strData, _ := o["stringData"].(map[string]any)
	if v, ok := strData[passwordKey].(string); ok {
		return base64.StdEncoding.EncodeToString([]byte(v)), nil
	}
	return "", fmt.Errorf("has no key %s", passwordKey)
}

// secret is Herald's copy of a password Secret.
func (sc *secretCopier) secret(name, password string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Secret",
		"metadata":   map[string]any{"name": name, "namespace": sc.opts.Namespace},
		"type":       secretTypeBasicAuth,
		"data":       map[string]any{passwordKey: password},
	}}
}

// PasswordSecrets returns the Secrets the BGPPeers among objs name, where
// Convert looks for them: passwordSecret.namespace, else the peer's
// namespace, else metallbNamespace. herald migrate reads them from the
// cluster, with the operator's credentials, so it refuses a reference
// outside metallbNamespace: MetalLB reads password Secrets from its own
// namespace only (v0.16.2: ConfigReconciler.getSecrets lists the Secrets of
// its namespace, passwordFromSecretForPeer looks the name up among them and
// never reads passwordSecret.namespace), and a BGPPeer that anyone who may
// write it points at kube-system must not make migrate copy a Secret from
// there. The error names every such peer and the namespace.
func PasswordSecrets(objs []Object, metallbNamespace string) ([]types.NamespacedName, error) {
	seen := map[types.NamespacedName]bool{}
	var out []types.NamespacedName
	var refused []string
	for _, o := range objs {
		if classify(o) != inputMetalLB || o["kind"] != "BGPPeer" {
			continue
		}
		spec, _ := o["spec"].(map[string]any)
		ref, _ := spec["passwordSecret"].(map[string]any)
		name, _ := ref["name"].(string)
		ns, _ := ref["namespace"].(string)
		if name == "" {
			continue
		}
		how := "names namespace"
		if ns == "" {
			ns, how = metaString(o, "namespace"), "is in the BGPPeer's namespace"
		}
		if ns == "" {
			ns = metallbNamespace
		}
		if ns != metallbNamespace {
			refused = append(refused, fmt.Sprintf("%s: spec.passwordSecret %s %s; only MetalLB's namespace %s is read (MetalLB reads BGP passwords only from there)",
				describe(o, metallbNamespace), how, ns, metallbNamespace))
			continue
		}
		if nn := (types.NamespacedName{Namespace: ns, Name: name}); !seen[nn] {
			seen[nn] = true
			out = append(out, nn)
		}
	}
	if len(refused) > 0 {
		return nil, errors.New(strings.Join(refused, "; "))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out, nil
}
