package speaker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker/plan"
)

// EventAdvertisingFromNodes is the Normal event on a Service when the set
// of nodes advertising it over BGP changes.
const EventAdvertisingFromNodes = "AdvertisingFromNodes"

// BGPStatusName is the name of the ServiceBGPStatus of a Service and node:
// "<namespace>.<name>.<node>", or, when that is longer than an object name
// may be (253), its first 236 characters, a dot and 16 hex digits of its
// SHA-256.
func BGPStatusName(namespace, name, node string) string {
	n := namespace + "." + name + "." + node
	if len(n) <= 253 {
		return n
	}
	sum := sha256.Sum256([]byte(n))
	return strings.TrimRight(n[:236], ".-") + "." + hex.EncodeToString(sum[:8])
}

// nodeLabelValue is the node's name as a label value: the name when it is
// short enough (63), else its first 46 characters, a dash and 16 hex digits
// of its SHA-256.
func nodeLabelValue(node string) string {
	if len(node) <= 63 {
		return node
	}
	sum := sha256.Sum256([]byte(node))
	return strings.TrimRight(node[:46], ".-") + "-" + hex.EncodeToString(sum[:8])
}

// ownBGPStatus selects the ServiceBGPStatus objects of node: the ones its
// speaker writes, caches (cacheOptions) and lists (syncBGPStatus).
func ownBGPStatus(node string) labels.Set {
	return labels.Set{v1beta1.LabelNode: nodeLabelValue(node)}
}

// bgpStatus is what one node reports for one Service.
type bgpStatus struct {
	namespace, name string
	peers, prefixes []string
}

// bgpStatusByService turns the ServiceBGPStatus objects the plan has this
// node write (plan.BGPDesired.Statuses) into their content as the API
// holds it: the prefixes as text, sorted as text, as the objects have
// always listed them. Pure.
func bgpStatusByService(sts []plan.BGPStatus) map[string]*bgpStatus {
	out := make(map[string]*bgpStatus, len(sts))
	for _, st := range sts {
		ns, name, _ := strings.Cut(st.Service, "/")
		s := &bgpStatus{namespace: ns, name: name, peers: st.Peers}
		for _, p := range st.Prefixes {
			s.prefixes = append(s.prefixes, p.String())
		}
		slices.Sort(s.prefixes)
		out[st.Service] = s
	}
	return out
}

// bgpNodeEvent is an AdvertisingFromNodes event to emit.
type bgpNodeEvent struct {
	service   string
	now, prev plan.NodeSet
}

// bgpNodeEvents lists the Services whose advertising nodes changed from
// prev to now that this node (self) reports: every speaker computes the
// same sets, and the first node of the new set (of the old one when nobody
// advertises any more) writes the event, so that it is written once. Pure.
func bgpNodeEvents(prev, now map[string]plan.NodeSet, self string) []bgpNodeEvent {
	var out []bgpNodeEvent
	keys := map[string]bool{}
	for k := range prev {
		keys[k] = true
	}
	for k := range now {
		keys[k] = true
	}
	for k := range keys {
		p, n := prev[k], now[k]
		if p.Equal(n) {
			continue
		}
		writer := n.Writer()
		if writer == "" {
			writer = p.Writer()
		}
		if writer == self {
			out = append(out, bgpNodeEvent{service: k, now: n, prev: p})
		}
	}
	slices.SortFunc(out, func(a, b bgpNodeEvent) int { return strings.Compare(a.service, b.service) })
	return out
}

// syncBGPStatus makes this node's ServiceBGPStatus objects match what it
// advertises, and emits the AdvertisingFromNodes events this node writes.
func (a *Agent) syncBGPStatus(ctx context.Context, svcs []corev1.Service, want map[string]*bgpStatus, nodes map[string]plan.NodeSet) error {
	byKey := map[string]*corev1.Service{}
	for i := range svcs {
		byKey[svcs[i].Namespace+"/"+svcs[i].Name] = &svcs[i]
	}
	if a.bgpNodes != nil {
		for _, ev := range bgpNodeEvents(a.bgpNodes, nodes, a.o.NodeName) {
			svc := byKey[ev.service]
			if svc == nil {
				continue
			}
			if ev.now.Count == 0 {
				a.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventAdvertisingFromNodes, "Advertise",
					"no longer advertised over BGP (was from %s)", ev.prev)
			} else {
				a.recorder.Eventf(svc, nil, corev1.EventTypeNormal, EventAdvertisingFromNodes, "Advertise",
					"advertised over BGP from %s (was %s)", ev.now, ev.prev)
			}
		}
	}
	a.bgpNodes = nodes

	var list v1beta1.ServiceBGPStatusList
	if err := a.c.List(ctx, &list, client.InNamespace(a.o.Namespace), client.MatchingLabels(ownBGPStatus(a.o.NodeName))); err != nil {
		return fmt.Errorf("listing ServiceBGPStatus: %w", err)
	}
	existing := map[string]*v1beta1.ServiceBGPStatus{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	var errs []error
	keep := map[string]bool{}
	for _, d := range want {
		obj := a.bgpStatusObject(d)
		keep[obj.Name] = true
		cur := existing[obj.Name]
		var err error
		switch {
		case cur == nil:
			err = a.c.Create(ctx, obj)
		case slices.Equal(cur.Status.Peers, obj.Status.Peers) && slices.Equal(cur.Status.Prefixes, obj.Status.Prefixes) &&
			cur.Status.Node == obj.Status.Node && slices.Equal(ownerUIDs(cur.OwnerReferences), ownerUIDs(obj.OwnerReferences)):
			continue
		default:
			obj.ResourceVersion = cur.ResourceVersion
			err = a.c.Update(ctx, obj)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	for name, cur := range existing {
		if keep[name] {
			continue
		}
		if err := a.c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing ServiceBGPStatus: %v", errs)
	}
	return nil
}

func (a *Agent) bgpStatusObject(d *bgpStatus) *v1beta1.ServiceBGPStatus {
	obj := &v1beta1.ServiceBGPStatus{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: a.o.Namespace,
			Name:      BGPStatusName(d.namespace, d.name, a.o.NodeName),
			Labels: map[string]string{
				v1beta1.LabelServiceNamespace: d.namespace,
				v1beta1.LabelServiceName:      d.name,
				v1beta1.LabelNode:             nodeLabelValue(a.o.NodeName),
			},
		},
		Status: v1beta1.ServiceBGPStatusStatus{Node: a.o.NodeName, Peers: d.peers, Prefixes: d.prefixes},
	}
	obj.OwnerReferences = a.ownerRefs()
	return obj
}
