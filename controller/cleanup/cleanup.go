// Package cleanup removes what a Herald release created at run time, for
// `herald cleanup` (the chart's post-delete hook): what Herald wrote on
// Services (the ingress entries it owns, its condition, the annotation it
// sets), the svclb DaemonSets, the speakers' status objects, the memberlist
// Secret, the webhook certificate Secret and the leader Lease. Helm removes
// what the chart rendered; this removes the rest.
//
// It first waits until no controller, ccm or speaker pod of the release runs: a
// live controller would write again what it removed. Every step is
// idempotent: a second run finds nothing and says so.
package cleanup

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/controller/svclb"
)

// The chart's labels on the release's pods.
const (
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	LabelComponent = "app.kubernetes.io/component"
	// AppName is the value of LabelName on every pod of the chart.
	AppName = "herald"
)

// Options say what belongs to the release.
type Options struct {
	// Namespace is the release namespace: its pods, status objects,
	// Secrets and Lease.
	Namespace string
	// Release is the Helm release name (the pods' LabelInstance).
	Release string
	// OnlyClass is the controller's --only-class: which Services it served.
	OnlyClass bool
	// CloudFinalizer: the release ran herald ccm with load balancing, whose
	// service controller put CloudFinalizer on the Services it served.
	CloudFinalizer bool
	// SvclbNamespace is where the svclb DaemonSets live ("": Namespace).
	SvclbNamespace string
	// SkipSvclb leaves the svclb DaemonSets (their namespace is deleted
	// with the release, and them with it).
	SkipSvclb bool
	// MemberlistSecret, WebhookCertSecret, BGPPasswordsSecret and
	// LeaseName name the Secrets and the Lease in Namespace ("": none).
	MemberlistSecret   string
	WebhookCertSecret  string
	BGPPasswordsSecret string
	LeaseName          string
	// MetricsCertSecrets name the metrics certificates' Secrets the
	// controller keeps (the controller's and the speakers').
	MetricsCertSecrets []string
	// WaitTimeout bounds the wait for the release's pods to stop.
	WaitTimeout time.Duration
	// PollInterval is how often the pods are listed (default 1s).
	PollInterval time.Duration
	Logger       *slog.Logger
}

// Result counts what a run removed.
type Result struct {
	Services, DaemonSets, StatusObjects, Secrets, Leases int
}

func (r Result) String() string {
	return fmt.Sprintf("%d Services cleared, %d svclb DaemonSets, %d status objects, %d Secrets, %d Leases deleted",
		r.Services, r.DaemonSets, r.StatusObjects, r.Secrets, r.Leases)
}

func (o Options) validate() error {
	var missing []string
	if o.Namespace == "" {
		missing = append(missing, "namespace")
	}
	if o.Release == "" {
		missing = append(missing, "release")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, " and "))
	}
	return nil
}

func (o Options) svclbNamespace() string {
	if o.SvclbNamespace != "" {
		return o.SvclbNamespace
	}
	return o.Namespace
}

// PodSelector selects the release's controller and speaker pods.
func PodSelector(release string) labels.Selector {
	name, _ := labels.NewRequirement(LabelName, selection.Equals, []string{AppName})
	inst, _ := labels.NewRequirement(LabelInstance, selection.Equals, []string{release})
	comp, _ := labels.NewRequirement(LabelComponent, selection.In, Components)
	return labels.NewSelector().Add(*name, *inst, *comp)
}

// Run waits for the release's pods to stop, then removes what the release
// left. It goes through every step even when one fails, and returns every
// failure.
func Run(ctx context.Context, c client.Client, o Options) (Result, error) {
	if err := o.validate(); err != nil {
		return Result{}, err
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if err := WaitForPods(ctx, c, o); err != nil {
		return Result{}, err
	}
	r := runner{c: c, o: o, log: o.Logger}
	errs := []error{r.services(ctx)}
	if !o.SkipSvclb {
		errs = append(errs, r.daemonSets(ctx))
	}
	errs = append(errs, r.statusObjects(ctx), r.secretsAndLease(ctx))
	err := errors.Join(errs...)
	if err == nil {
		r.log.Info("cleanup done", "removed", r.res.String())
	}
	return r.res, err
}

// WaitForPods returns once no controller, ccm or speaker pod of the release may
// still write (LivePods), or an error naming them after o.WaitTimeout.
func WaitForPods(ctx context.Context, c client.Client, o Options) error {
	poll := o.PollInterval
	if poll <= 0 {
		poll = time.Second
	}
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	deadline := time.Now().Add(o.WaitTimeout)
	sel := PodSelector(o.Release)
	said := ""
	for {
		var pods corev1.PodList
		err := c.List(ctx, &pods, client.InNamespace(o.Namespace), client.MatchingLabelsSelector{Selector: sel})
		if err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return fmt.Errorf("listing the pods of release %q in %s: %w", o.Release, o.Namespace, err)
			}
			log.Warn("cannot list the release's pods; retrying", "error", err)
		} else {
			live := LivePods(pods.Items)
			if len(live) == 0 {
				return nil
			}
			if s := strings.Join(live, ", "); s != said {
				log.Info("waiting for the release's pods to stop", "pods", live, "timeout", o.WaitTimeout.String())
				said = s
			}
			if !time.Now().Before(deadline) {
				return fmt.Errorf("after %s, %d pod(s) of release %q still run: %s. A running controller, ccm or speaker writes "+
					"again what cleanup removes; nothing was removed. Remove the release's Deployment and DaemonSet (helm "+
					"uninstall does) and run again", o.WaitTimeout, len(live), o.Release, strings.Join(live, ", "))
			}
		}
		if err != nil && !time.Now().Before(deadline) {
			return fmt.Errorf("after %s, cannot list the pods of release %q in %s: %w", o.WaitTimeout, o.Release, o.Namespace, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(poll):
		}
	}
}

type runner struct {
	c   client.Client
	o   Options
	log *slog.Logger
	res Result
}

// services clears what Herald wrote on every Service of the cluster.
func (r *runner) services(ctx context.Context) error {
	var list corev1.ServiceList
	if err := r.c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing Services: %w", err)
	}
	var errs []error
	for i := range list.Items {
		if PlanService(&list.Items[i], r.o.OnlyClass, r.o.CloudFinalizer).Empty() {
			continue
		}
		if err := r.cleanService(ctx, &list.Items[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// cleanService writes one Service's change with optimistic locking, planned
// again from a fresh copy after a conflict.
func (r *runner) cleanService(ctx context.Context, svc *corev1.Service) error {
	nn := client.ObjectKeyFromObject(svc)
	cur := svc
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if cur == nil {
			cur = &corev1.Service{}
			if err := r.c.Get(ctx, nn, cur); err != nil {
				return err
			}
		}
		ch := PlanService(cur, r.o.OnlyClass, r.o.CloudFinalizer)
		if ch.Empty() {
			return nil
		}
		obj := cur.DeepCopy()
		cur = nil // a retry reads it again
		if ch.StatusChanged() {
			base := obj.DeepCopy()
			after := ch.Apply(obj)
			obj.Status = after.Status
			if err := r.c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return err
			}
		}
		if ch.MetadataChanged() {
			base := obj.DeepCopy()
			after := ch.Apply(obj)
			obj.Annotations, obj.Finalizers = after.Annotations, after.Finalizers
			if err := r.c.Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return err
			}
		}
		var ips []string
		for _, in := range ch.DropIngress {
			ips = append(ips, in.IP)
		}
		r.log.Info("removed Herald's status from Service", "service", nn.String(), "ingress", ips,
			"condition", ch.DropCondition, "annotations", ch.DropAnnotations, "cloudFinalizer", ch.DropFinalizer, "ingressKept", len(ch.Ingress))
		r.res.Services++
		return nil
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("service %s: %w", nn, err)
	}
	return nil
}

// daemonSets deletes the svclb DaemonSets (Herald's labels) in the ServiceLB
// namespace.
func (r *runner) daemonSets(ctx context.Context) error {
	ns := r.o.svclbNamespace()
	var list appsv1.DaemonSetList
	if err := r.c.List(ctx, &list, client.InNamespace(ns),
		client.MatchingLabels{svclb.LabelManagedBy: svclb.ManagedBy, svclb.LabelComponent: svclb.Component}); err != nil {
		return fmt.Errorf("listing svclb DaemonSets in %s: %w", ns, err)
	}
	var errs []error
	for i := range list.Items {
		ds := &list.Items[i]
		ok, err := r.delete(ctx, ds, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting svclb DaemonSet %s/%s: %w", ns, ds.Name, err))
			continue
		}
		if ok {
			r.log.Info("deleted svclb DaemonSet", "daemonset", ns+"/"+ds.Name,
				"service", ds.Labels[v1beta1.LabelServiceNamespace]+"/"+ds.Labels[v1beta1.LabelServiceName])
			r.res.DaemonSets++
		}
	}
	return errors.Join(errs...)
}

// statusObjects deletes the speakers' ServiceL2Status, ServiceBGPStatus and
// SpeakerStatus objects in the release namespace (every one: the kinds are
// Herald's).
func (r *runner) statusObjects(ctx context.Context) error {
	type item struct {
		kind string
		obj  client.Object
	}
	var errs []error
	var items []item
	var l2 v1beta1.ServiceL2StatusList
	if err := r.c.List(ctx, &l2, client.InNamespace(r.o.Namespace)); err != nil {
		errs = append(errs, fmt.Errorf("listing ServiceL2Status in %s: %w", r.o.Namespace, err))
	}
	for i := range l2.Items {
		items = append(items, item{"ServiceL2Status", &l2.Items[i]})
	}
	var bgp v1beta1.ServiceBGPStatusList
	if err := r.c.List(ctx, &bgp, client.InNamespace(r.o.Namespace)); err != nil {
		errs = append(errs, fmt.Errorf("listing ServiceBGPStatus in %s: %w", r.o.Namespace, err))
	}
	for i := range bgp.Items {
		items = append(items, item{"ServiceBGPStatus", &bgp.Items[i]})
	}
	var sp v1beta1.SpeakerStatusList
	if err := r.c.List(ctx, &sp, client.InNamespace(r.o.Namespace)); err != nil {
		errs = append(errs, fmt.Errorf("listing SpeakerStatus in %s: %w", r.o.Namespace, err))
	}
	for i := range sp.Items {
		items = append(items, item{"SpeakerStatus", &sp.Items[i]})
	}
	for _, it := range items {
		name := r.o.Namespace + "/" + it.obj.GetName()
		ok, err := r.delete(ctx, it.obj)
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting %s %s: %w", it.kind, name, err))
			continue
		}
		if ok {
			r.log.Info("deleted status object", "kind", it.kind, "object", name)
			r.res.StatusObjects++
		}
	}
	return errors.Join(errs...)
}

// secretsAndLease deletes the memberlist, webhook certificate, BGP password
// copy and metrics certificate Secrets and the leader Lease, when present.
func (r *runner) secretsAndLease(ctx context.Context) error {
	var errs []error
	for _, name := range append([]string{r.o.MemberlistSecret, r.o.WebhookCertSecret, r.o.BGPPasswordsSecret}, r.o.MetricsCertSecrets...) {
		if name == "" {
			continue
		}
		ok, err := r.delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.o.Namespace, Name: name}})
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting Secret %s/%s: %w", r.o.Namespace, name, err))
		} else if ok {
			r.log.Info("deleted Secret", "secret", r.o.Namespace+"/"+name)
			r.res.Secrets++
		}
	}
	if name := r.o.LeaseName; name != "" {
		ok, err := r.delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: r.o.Namespace, Name: name}})
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting Lease %s/%s: %w", r.o.Namespace, name, err))
		} else if ok {
			r.log.Info("deleted Lease", "lease", r.o.Namespace+"/"+name)
			r.res.Leases++
		}
	}
	return errors.Join(errs...)
}

// delete deletes obj; it reports false, without error, when it was gone.
func (r *runner) delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) (bool, error) {
	err := r.c.Delete(ctx, obj, opts...)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
