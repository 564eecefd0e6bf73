package cleanup

import (
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
)

// ServiceChange is what cleanup removes from one Service. The zero value
// removes nothing.
type ServiceChange struct {
	// Ingress is status.loadBalancer.ingress as it must be left, when
	// DropIngress is not empty (nil: no entry left).
	Ingress []corev1.LoadBalancerIngress
	// DropIngress are the entries Herald wrote, to be removed.
	DropIngress []corev1.LoadBalancerIngress
	// DropCondition removes Herald's conditions (svcstatus.ConditionType,
	// ConditionSharing, and the speakers' ConditionAnnounced).
	DropCondition bool
	// DropAnnotations are the annotations Herald set, to be removed.
	DropAnnotations []string
	// DropFinalizer removes the service controller's CloudFinalizer.
	DropFinalizer bool
}

// CloudFinalizer is the finalizer the cloud controller manager's service
// controller puts on the Services it hands a load balancer (herald ccm's,
// when it does load balancing). Nothing removes it once that manager is
// gone, and a Service carrying it is never deleted.
const CloudFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// Empty reports whether there is nothing to remove.
func (c ServiceChange) Empty() bool {
	return len(c.DropIngress) == 0 && !c.DropCondition && len(c.DropAnnotations) == 0 && !c.DropFinalizer
}

// MetadataChanged reports whether the Service itself (annotations,
// finalizers) must be written.
func (c ServiceChange) MetadataChanged() bool { return len(c.DropAnnotations) > 0 || c.DropFinalizer }

// StatusChanged reports whether the status subresource must be written.
func (c ServiceChange) StatusChanged() bool { return len(c.DropIngress) > 0 || c.DropCondition }

// heraldAnnotations are the Service annotations the controller itself sets.
// The request annotations (herald.dev/loadBalancerIPs, address-pool,
// allow-shared-ip and MetalLB's) are the user's and are never listed here.
var heraldAnnotations = []string{v1beta1.AnnotationIPAllocatedFromPool}

// PlanService decides what of Herald's is left on svc after Herald is gone:
//
//   - Herald's conditions (the controller's and the speakers'
//     herald.dev/Announced) and the annotations Herald sets, wherever they
//     are: their names are Herald's, nobody else writes them. The speakers'
//     condition alone is no mark that Herald wrote the addresses.
//   - The ingress entries Herald wrote, only on a Service Herald served (class
//     herald.dev/lb, or no class unless onlyClass) whose status carries
//     Herald's mark (its condition or its pool annotation). Of those entries,
//     only the ones shaped as Herald writes them: an IP, no hostname, no
//     ports, the ipMode Herald uses for the Service (VIP for an address
//     pool, Proxy for a node-address pool; unset where the API server drops
//     the field). A Service whose condition says it holds nothing (status
//     False) has no entry of Herald's: whatever is there, someone else wrote.
//
// With cloudFinalizer (the release ran herald ccm with load balancing), the
// service controller's CloudFinalizer goes too from a Service Herald served
// by its class: herald ccm, which would have removed it, is gone.
//
// Everything else (another controller's entries, hostnames, entries with
// ports, user annotations) stays.
func PlanService(svc *corev1.Service, onlyClass, cloudFinalizer bool) ServiceChange {
	var ch ServiceChange
	ch.DropFinalizer = cloudFinalizer && served(svc, onlyClass) && slices.Contains(svc.Finalizers, CloudFinalizer)
	cond := svcstatus.Condition(svc)
	ch.DropCondition = cond != nil || meta.FindStatusCondition(svc.Status.Conditions, svcstatus.ConditionSharing) != nil ||
		svcstatus.AnnouncedCondition(svc) != nil
	for _, a := range heraldAnnotations {
		if _, ok := svc.Annotations[a]; ok {
			ch.DropAnnotations = append(ch.DropAnnotations, a)
		}
	}
	if !served(svc, onlyClass) || !svcstatus.Ours(svc) || (cond != nil && cond.Status == metav1.ConditionFalse) {
		return ch
	}
	mode := corev1.LoadBalancerIPModeVIP
	if svcstatus.NodePool(svc) != "" {
		mode = corev1.LoadBalancerIPModeProxy
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if heraldEntry(in, mode) {
			ch.DropIngress = append(ch.DropIngress, in)
		} else {
			ch.Ingress = append(ch.Ingress, in)
		}
	}
	if len(ch.DropIngress) == 0 {
		ch.Ingress = nil
	}
	return ch
}

// served reports whether Herald served svc by its class: Herald's, or none
// unless onlyClass. (The Service's type is not asked: a Service that stopped
// being a LoadBalancer may still carry what Herald wrote.)
func served(svc *corev1.Service, onlyClass bool) bool {
	if svc.Spec.LoadBalancerClass == nil {
		return !onlyClass
	}
	return *svc.Spec.LoadBalancerClass == svcstatus.ClassName
}

// heraldEntry reports whether an ingress entry has the shape Herald writes
// with ipMode mode.
func heraldEntry(in corev1.LoadBalancerIngress, mode corev1.LoadBalancerIPMode) bool {
	if in.Hostname != "" || len(in.Ports) > 0 {
		return false
	}
	if _, err := netip.ParseAddr(in.IP); err != nil {
		return false
	}
	return in.IPMode == nil || *in.IPMode == mode
}

// Apply returns a copy of svc with the change made (what the writes leave).
func (c ServiceChange) Apply(svc *corev1.Service) *corev1.Service {
	out := svc.DeepCopy()
	if len(c.DropIngress) > 0 {
		out.Status.LoadBalancer.Ingress = slices.Clone(c.Ingress)
	}
	if c.DropCondition {
		out.Status.Conditions = slices.DeleteFunc(out.Status.Conditions, func(x metav1.Condition) bool {
			return x.Type == svcstatus.ConditionType || x.Type == svcstatus.ConditionSharing || x.Type == svcstatus.ConditionAnnounced
		})
		if len(out.Status.Conditions) == 0 {
			out.Status.Conditions = nil
		}
	}
	for _, a := range c.DropAnnotations {
		delete(out.Annotations, a)
	}
	if c.DropFinalizer {
		out.Finalizers = slices.DeleteFunc(out.Finalizers, func(f string) bool { return f == CloudFinalizer })
		if len(out.Finalizers) == 0 {
			out.Finalizers = nil
		}
	}
	return out
}
