package speaker

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/utf8text"
	"github.com/herald-lb/herald/speaker/plan"
)

// StatusName is the name of a Service's ServiceL2Status: "<namespace>.<name>",
// a valid DNS subdomain (both parts are DNS labels without dots), unique
// and stable.
func StatusName(namespace, name string) string { return namespace + "." + name }

// desiredStatus is what this node reports for one Service.
type desiredStatus struct {
	namespace, name string
	addrs           []string
	ifaces          []string // sorted, the default set resolved
}

// statusByService turns the ServiceL2Status objects the plan has this node
// write (plan.Result.L2Statuses: which Services, which addresses, which
// interfaces) into their content as the API holds it. def is the node's
// default interface set as the announcer answers on it now: it stands for
// "every eligible interface", which only the speaker knows.
func statusByService(sts []plan.L2Status, def []string) map[string]*desiredStatus {
	out := make(map[string]*desiredStatus, len(sts))
	for _, st := range sts {
		ns, name, _ := strings.Cut(st.Service, "/")
		d := &desiredStatus{namespace: ns, name: name, ifaces: statusInterfaces(st, def)}
		for _, a := range st.Addrs {
			d.addrs = append(d.addrs, a.String())
		}
		out[st.Service] = d
	}
	return out
}

// statusInterfaces are the interfaces st's node answers on, def standing
// for every eligible one, each as the API will hold it (JSON strings are
// UTF-8), so that what is read back compares equal; sorted, nil for none.
func statusInterfaces(st plan.L2Status, def []string) []string {
	var out []string
	for _, i := range st.Interfaces {
		out = append(out, utf8text.Escape(i))
	}
	if st.EveryInterface {
		for _, i := range def {
			out = append(out, utf8text.Escape(i))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// syncStatus makes the ServiceL2Status objects match sts, those the plan has
// this node write: it creates or takes over their objects (emitting
// AnnouncingFromNode when the node changes) and deletes those naming it
// for Services it no longer writes. Objects naming other nodes are theirs.
func (a *Agent) syncStatus(ctx context.Context, svcs []corev1.Service, sts []plan.L2Status, def []string) error {
	var list v1beta1.ServiceL2StatusList
	if err := a.c.List(ctx, &list, client.InNamespace(a.o.Namespace)); err != nil {
		return err
	}
	existing := map[string]*v1beta1.ServiceL2Status{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	byKey := map[string]*corev1.Service{}
	for i := range svcs {
		byKey[svcs[i].Namespace+"/"+svcs[i].Name] = &svcs[i]
	}
	want := statusByService(sts, def)
	var errs []error
	keep := map[string]bool{}
	for key, d := range want {
		name := StatusName(d.namespace, d.name)
		keep[name] = true
		obj := a.statusObject(d)
		cur := existing[name]
		var err error
		switch {
		case cur == nil:
			err = a.c.Create(ctx, obj)
			if apierrors.IsAlreadyExists(err) {
				err = fmt.Errorf("creating %s: %w (cache behind; retried)", name, err)
			}
		case cur.Status.Node == a.o.NodeName && sameStatus(cur, obj):
			continue
		default:
			obj.ResourceVersion = cur.ResourceVersion
			err = a.c.Update(ctx, obj)
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		old := ""
		if cur != nil {
			old = cur.Status.Node
		}
		if old != a.o.NodeName {
			if svc := byKey[key]; svc != nil {
				from := old
				if from == "" {
					from = "(none)"
				}
				// related is the ServiceL2Status as just written, with
				// its new resourceVersion: the events/v1 recorder folds
				// events alike in everything but the note into one series
				// that keeps the first note (client-go tools/events,
				// getKey and recordToSink), so without it a node that
				// takes an address back would show its first take-over.
				a.recorder.Eventf(svc, obj, corev1.EventTypeNormal, EventAnnouncingFromNode, "Announce",
					"announcing %s from node %s (was %s)", strings.Join(d.addrs, ", "), a.o.NodeName, from)
			}
			a.log.Info("announcing service", "service", key, "from", old, "addresses", d.addrs)
		}
	}
	for name, cur := range existing {
		if keep[name] || cur.Status.Node != a.o.NodeName {
			continue
		}
		// Delete only the version read: if the new announcer took the
		// object over meanwhile, the precondition fails and it stays.
		err := a.c.Delete(ctx, cur, client.Preconditions{UID: &cur.UID, ResourceVersion: &cur.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing ServiceL2Status: %v", errs)
	}
	return nil
}

func (a *Agent) statusObject(d *desiredStatus) *v1beta1.ServiceL2Status {
	obj := &v1beta1.ServiceL2Status{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: a.o.Namespace,
			Name:      StatusName(d.namespace, d.name),
			Labels: map[string]string{
				v1beta1.LabelServiceNamespace: d.namespace,
				v1beta1.LabelServiceName:      d.name,
			},
		},
		Status: v1beta1.ServiceL2StatusStatus{Node: a.o.NodeName, Interfaces: d.ifaces, Addresses: d.addrs},
	}
	obj.OwnerReferences = a.ownerRefs()
	return obj
}

// ownerRefs make the speaker's Pod the owner of the status objects it
// writes, so that they go with it (none when the Pod is not known).
func (a *Agent) ownerRefs() []metav1.OwnerReference {
	if a.o.PodName == "" || a.o.PodUID == "" {
		return nil
	}
	return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: a.o.PodName, UID: types.UID(a.o.PodUID)}}
}

func sameStatus(cur, want *v1beta1.ServiceL2Status) bool {
	return reflect.DeepEqual(cur.Labels, want.Labels) &&
		slices.Equal(cur.Status.Addresses, want.Status.Addresses) &&
		slices.Equal(cur.Status.Interfaces, want.Status.Interfaces) &&
		reflect.DeepEqual(ownerUIDs(cur.OwnerReferences), ownerUIDs(want.OwnerReferences))
}

func ownerUIDs(refs []metav1.OwnerReference) []types.UID {
	var out []types.UID
	for _, r := range refs {
		out = append(out, r.UID)
	}
	return out
}
