package speaker

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config"
	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/svcstatus"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/speaker/inputs"
	"github.com/herald-lb/herald/speaker/plan"
)

func (a *Agent) trigger() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// watched are the kinds whose every change re-plans. The configuration
// kinds are watched as unstructured objects (configobjs): one object the
// typed decoder cannot read must not stop the cache. The status objects are
// not among them: no plan reads them, and the speaker's own writes would
// re-plan once per object written (thousands at size); a change to a
// ServiceL2Status makes the status writer check its objects again.
func (a *Agent) watched() []client.Object {
	return append([]client.Object{
		&corev1.Service{}, &discoveryv1.EndpointSlice{}, &corev1.Node{}, &corev1.Secret{},
	}, configobjs.Kinds()...)
}

// onChange calls changed for every add and delete, and for every update
// that changed more than the resourceVersion (sameForPlan).
func onChange(changed func()) toolscache.ResourceEventHandlerFuncs {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { changed() },
		UpdateFunc: func(oldObj, newObj any) {
			if !sameForPlan(oldObj, newObj) {
				changed()
			}
		},
		DeleteFunc: func(any) { changed() },
	}
}

// onServiceChange is onChange for Services, except that an update that
// changed only the condition herald.dev/Announced calls poke instead: no
// plan reads that condition, and the reporter's own writes of it must not
// re-plan once per Service written; the status writer checks it again
// (someone else may have changed it).
func onServiceChange(changed, poke func()) toolscache.ResourceEventHandlerFuncs {
	h := onChange(changed)
	h.UpdateFunc = func(oldObj, newObj any) {
		switch {
		case sameForPlan(oldObj, newObj):
		case onlyAnnouncedChanged(oldObj, newObj):
			poke()
		default:
			changed()
		}
	}
	return h
}

// onlyAnnouncedChanged reports whether two versions of a Service differ only
// in their resourceVersion and herald.dev/Announced condition.
func onlyAnnouncedChanged(oldObj, newObj any) bool {
	o, ok := oldObj.(*corev1.Service)
	if !ok {
		return false
	}
	n, ok := newObj.(*corev1.Service)
	if !ok {
		return false
	}
	strip := func(s *corev1.Service) *corev1.Service {
		c := s.DeepCopy()
		c.ResourceVersion = ""
		c.Status.Conditions = slices.DeleteFunc(c.Status.Conditions, func(x metav1.Condition) bool {
			return x.Type == svcstatus.ConditionAnnounced
		})
		if len(c.Status.Conditions) == 0 {
			c.Status.Conditions = nil
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(o), strip(n))
}

// sameForPlan reports whether an update changed nothing but the object's
// resourceVersion. The caches keep only what the planner reads
// (internal/cachetrim), so such an update (a Node's status heartbeat, an
// EndpointSlice change in a field Herald does not read, a resync) cannot
// change a plan, and re-planning the whole state for it is waste: at 1,000
// Nodes the kubelets' heartbeats alone arrive several times a second.
func sameForPlan(oldObj, newObj any) bool {
	o, ok := oldObj.(client.Object)
	if !ok {
		return false
	}
	n, ok := newObj.(client.Object)
	if !ok {
		return false
	}
	if o.GetResourceVersion() == n.GetResourceVersion() {
		return true
	}
	oc, nc := o.DeepCopyObject().(client.Object), n.DeepCopyObject().(client.Object)
	oc.SetResourceVersion("")
	nc.SetResourceVersion("")
	return equality.Semantic.DeepEqual(oc, nc)
}

// loop is the level-triggered loop: every input change (watches,
// memberlist) re-plans from the whole cached state. Changes arriving during
// a plan are coalesced into one more plan.
func (a *Agent) loop(ctx context.Context) error {
	watch := func(obj client.Object, h toolscache.ResourceEventHandler) error {
		inf, err := a.mgr.GetCache().GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("watching %T: %w", obj, err)
		}
		_, err = inf.AddEventHandler(h)
		return err
	}
	for _, obj := range a.watched() {
		h := onChange(a.trigger)
		if _, ok := obj.(*corev1.Service); ok {
			h = onServiceChange(a.trigger, a.statusq.poke)
		}
		if err := watch(obj, h); err != nil {
			return err
		}
	}
	// Another writer's change to a ServiceL2Status (a speaker taking one
	// over, a user deleting one) is checked against the newest plan.
	if err := watch(&v1beta1.ServiceL2Status{}, onChange(a.statusq.poke)); err != nil {
		return err
	}
	if !a.mgr.GetCache().WaitForCacheSync(ctx) {
		return nil
	}
	a.waitForPeers(ctx)

	var retry <-chan time.Time
	a.trigger()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.kick:
		case <-a.ml.Changes():
		case <-a.ann.DefaultChanged(): // the status names the interfaces
		case <-retry:
		}
		retry = nil
		if err := a.sync(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			a.log.Warn("sync failed, retrying", "error", err)
			retry = time.After(time.Second)
		}
	}
}

// waitForPeers gives memberlist up to JoinWait to see another speaker
// before the first plan, when other nodes exist.
func (a *Agent) waitForPeers(ctx context.Context) {
	var nodes corev1.NodeList
	if err := a.c.List(ctx, &nodes); err != nil {
		return
	}
	peers := Peers(nodes.Items, a.ml.Addr().Addr(), int(a.ml.Addr().Port()))
	a.ml.SetPeers(peers)
	others := 0
	for _, p := range peers {
		if p.Addr != a.ml.Addr() {
			others++
		}
	}
	if others == 0 {
		return
	}
	deadline := time.After(a.o.JoinWait)
	for len(a.ml.Joined()) < 2 {
		select {
		case <-ctx.Done():
			return
		case <-deadline:
			a.log.Warn("no other speaker alive yet; planning with this node alone", "peers", len(peers))
			return
		case <-a.ml.Changes():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// snapshot reads the cache. The objects are the cache's own, not copies
// (a re-plan at 10,000 Services copied 28 MB of them): the snapshot is read
// and never written, by inputs.Build, the planner and the status writer
// (TestSnapshotReadOnly).
func (a *Agent) snapshot(ctx context.Context) (inputs.Snapshot, error) {
	var svcs corev1.ServiceList
	var eps discoveryv1.EndpointSliceList
	var nodes corev1.NodeList
	for _, l := range []client.ObjectList{&svcs, &eps, &nodes} {
		if err := a.c.List(ctx, l, client.UnsafeDisableDeepCopy); err != nil {
			return inputs.Snapshot{}, err
		}
	}
	objs, err := a.listConfig(ctx)
	if err != nil {
		return inputs.Snapshot{}, err
	}
	res := config.ParseKeepingLastValid(objs)
	if p := res.Problems(); p.Error() != a.problems {
		a.problems = p.Error()
		if len(p) > 0 {
			a.log.Info("configuration problems (the controller reports them on the objects; the speaker uses the valid or last valid objects)", "problems", p.Error())
		}
	}
	return inputs.Snapshot{
		Config:    res.Config,
		Services:  svcs.Items,
		Slices:    eps.Items,
		Nodes:     nodes.Items,
		Alive:     a.ml.Alive(),
		OnlyClass: a.o.OnlyClass,
	}, nil
}

// listConfig reads the configuration from the cache (the client would read
// unstructured objects from the API server).
func (a *Agent) listConfig(ctx context.Context) (config.Objects, error) {
	return a.configLister.List(ctx, a.mgr.GetCache(), a.o.Namespace)
}

// sync plans from the cache and applies the node's part: the announcer,
// the BGP sessions and the metrics; it hands the status objects to
// writeStatuses.
func (a *Agent) sync(ctx context.Context) error {
	snap, err := a.snapshot(ctx)
	if err != nil {
		return err
	}
	a.ml.SetPeers(Peers(snap.Nodes, a.ml.Addr().Addr(), int(a.ml.Addr().Port())))
	a.followKey()
	in := inputs.Build(snap)
	res := plan.Compute(in)
	want := res.For(a.o.NodeName)

	desired := make(map[netip.Addr][]string, len(want.L2))
	for _, l := range want.L2 {
		desired[l.Addr] = l.Interfaces
	}
	// The announcer keeps the set, skips it when unchanged and logs the
	// changes.
	if err := a.ann.Set(desired); err != nil {
		// Set is idempotent and applies every valid entry; what it
		// rejects would be rejected again.
		a.log.Warn("announcer rejected part of the plan", "error", err)
	}
	// A speaker that arrived in this speaker's view may have announced
	// some of these addresses while it could not see us (a partition, or
	// a restart that came back before it was declared dead): the clients
	// may hold its MAC. Announce ours again so they come back.
	if arr := a.ml.Stats().Arrivals; arr != a.arrivals {
		if a.arrivals != 0 && len(desired) > 0 {
			a.log.Info("a speaker arrived: announcing again", "addresses", len(desired))
			a.ann.Reannounce()
		}
		a.arrivals = arr
	}
	// The cache has synced, a plan is computed and the responders carry
	// it: from now on this speaker can answer for what it is elected for,
	// so the others (and its own plans) may count it. Before, it is a
	// member that no election chooses.
	a.ml.SetReady(true)
	sessions, bgpErr := a.syncBGP(ctx, want.BGP)
	if bgpErr == nil {
		a.ready.Store(true)
	}
	// The metrics after the announcements, which do not wait for them
	// (the unannounced addresses are a pass over every address).
	a.met.setAnnounced(a.o.NodeName, want.L2)
	rep := reporter(a.o.NodeName, in.Alive)
	a.met.setUnannounced(rep, res.Unannounced())
	a.met.plans.Inc()
	// The node's own report (SpeakerStatus), written by
	// writeSpeakerStatus at its own pace.
	a.setSpeakerCounts(speakerCounts{members: len(a.ml.Joined()), l2: len(want.L2)})
	// The status objects are reports, written by writeStatuses on its own
	// goroutine: a plan is announced without waiting for them, and one
	// that cannot be written neither keeps the speaker from being ready
	// nor from applying the next plan.
	job := &statusJob{svcs: snap.Services, l2: res.L2Statuses(a.o.NodeName), def: a.ann.DefaultInterfaces()}
	if bgpErr == nil {
		job.bgp = bgpStatusByService(want.BGP.Statuses(sessions))
		job.bgpNodes = res.BGPNodeSetsByService()
	}
	// The condition herald.dev/Announced: the reporter's view, as the
	// metric's, written by the reporter alone, once it has been the
	// reporter for ReporterSettle (writeStatus waits for that).
	if !rep {
		a.reporterSince = time.Time{}
	} else if a.reporterSince.IsZero() {
		a.reporterSince = time.Now()
	}
	if rep && a.o.AnnouncedCondition {
		job.announce = &announceJob{res: res, svcs: in.Services, since: a.reporterSince}
	}
	a.statusq.put(job)
	return bgpErr
}
