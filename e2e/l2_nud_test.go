//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/e2e"
)

// The lan client keeps a Service's address in its neighbour table only while the announcer answers the
// client's re-verification: after the reachable time (15-45 s) the entry goes STALE, the next datagram makes it
// DELAY and then PROBE, and the kernel sends unicast solicitations (NS to the address itself, unicast ARP) that
// must be answered, or the entry goes FAILED and datagrams are dropped. Replies to UDP do not confirm
// reachability (only TCP progress and MSG_CONFIRM do), so for the client's neighbour table a UDP request stream is
// one-way traffic, the case in which a responder that misses unicast solicitations loses the entry every
// 30-45 s (metallb#2920).
//
// make e2e shortens the client's timers (HERALD_E2E_NUD_REACHABLE_MS, default 4000: REACHABLE for 2-6 s, then the
// first probe 1 s after the entry is used STALE), so that its 30 s go through about five re-verifications (90 s
// with the kernel's 30 s base went through two or three); make bench-nud keeps the kernel's timers (0).
func TestL2NeighbourSurvivesUnreachabilityDetection(t *testing.T) {
	// HERALD_E2E_NUD_SECONDS: 30 in make e2e, NUD_SECONDS (default 180) in make bench-nud.
	d := time.Duration(envInt(t, "HERALD_E2E_NUD_SECONDS", 30, 10, 3600)) * time.Second
	reachable := time.Duration(envInt(t, "HERALD_E2E_NUD_REACHABLE_MS", 4000, 0, 3_600_000)) * time.Millisecond
	ctx := testContext(t, d+6*time.Minute)
	if reachable > 0 {
		restore, err := cluster.Client().NeighborTimers(ctx, reachable, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := restore(); err != nil {
				t.Errorf("putting the client's neighbour timers back: %v", err)
			}
		})
	}
	f := installSpeakers(t, ctx)
	// ARP always; NDP where the cluster has IPv6 (an IPv4-only cluster, kind's or LAB_IPV6=0, has no IPv6 range).
	r := cluster.Ranges()
	addrs := []netip.Addr{nthAddr(r.L2, 31)}
	poolAddrs := []string{addrs[0].String() + "/32"}
	if r.L2v6.IsValid() {
		v6 := nthAddr(r.L2v6, 31)
		addrs, poolAddrs = append(addrs, v6), append(poolAddrs, v6.String()+"/128")
	} else {
		t.Log("the cluster is IPv4 only: ARP only, no NDP case")
	}
	f.create(t, ctx, &v1beta1.IPAddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-nud", Namespace: "herald-system"},
		Spec:       v1beta1.IPAddressPoolSpec{Addresses: poolAddrs},
	})
	f.create(t, ctx, &v1beta1.L2Advertisement{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-nud", Namespace: "herald-system"},
		Spec:       v1beta1.L2AdvertisementSpec{IPAddressPools: []string{"e2e-nud"}},
	})
	ns := testNamespace(t, ctx)
	echoDeployment(t, ctx, ns)
	prefer := corev1.IPFamilyPolicyPreferDualStack
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "nud", Namespace: ns, Annotations: map[string]string{v1beta1.AnnotationAddressPool: "e2e-nud"}},
		Spec: corev1.ServiceSpec{
			Type:           corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy: &prefer,
			IPFamilies:     []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}[:len(addrs)],
			Selector:       echoLabels,
			Ports:          []corev1.ServicePort{{Name: "udp", Port: 9090, TargetPort: intstr.FromInt32(9090), Protocol: corev1.ProtocolUDP}},
		},
	}
	if err := f.c.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the service's addresses", func() (bool, error) {
		err := f.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: "nud"}, svc)
		return err == nil && len(svc.Status.LoadBalancer.Ingress) == len(addrs), err
	})
	owner := settled(t, ctx, "one announcer", addrs, anyNode)
	// kube-proxy programs the Service on its own time: wait until both addresses answer.
	for _, a := range addrs {
		waitFor(t, ctx, "UDP answers from "+a.String(), func() (bool, error) {
			sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			rep, err := cluster.Client().StreamUDP(sctx, netip.AddrPortFrom(a, 9090), 10*time.Millisecond)
			return err == nil && rep.Received > 0, nil
		})
	}

	// Watch both entries from before the stream starts.
	cl := cluster.Client()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	type watched struct {
		addr   netip.Addr
		events []e2e.NeighborChange
		done   chan struct{}
	}
	var mu sync.Mutex
	var ws []*watched
	for _, a := range addrs {
		ch, err := cl.WatchNeighbor(wctx, a)
		if err != nil {
			t.Fatal(err)
		}
		w := &watched{addr: a, done: make(chan struct{})}
		ws = append(ws, w)
		go func() {
			defer close(w.done)
			for ev := range ch {
				mu.Lock()
				w.events = append(w.events, ev)
				mu.Unlock()
			}
		}()
	}
	// `ip monitor` is running once it reports an entry forgotten and resolved again (REACHABLE last).
	for _, w := range ws {
		waitFor(t, ctx, "the neighbour watch reporting "+w.addr.String()+" resolved", func() (bool, error) {
			mu.Lock()
			n := len(w.events)
			resolved := n > 0 && w.events[n-1].State == "REACHABLE"
			mu.Unlock()
			if resolved {
				return true, nil
			}
			if err := cl.ForgetNeighbor(ctx, w.addr); err != nil {
				return false, err
			}
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, _ = cl.Neighbor(rctx, w.addr)
			cancel()
			time.Sleep(100 * time.Millisecond) // let the watch catch up before looking again
			return false, nil
		})
	}
	// The entries are resolved now (the check above); from here on every change counts.
	mu.Lock()
	for _, w := range ws {
		w.events = nil
	}
	mu.Unlock()

	timers := "the kernel's neighbour timers"
	if reachable > 0 {
		timers = fmt.Sprintf("base reachable time %v, first probe after 1 s", reachable)
	}
	t.Logf("streaming UDP every 10 ms to %v (announced by %s) for %v, %s", addrs, owner[addrs[0]], d, timers)
	sctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	reports := make([]e2e.StreamReport, len(addrs))
	errs := make([]error, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reports[i], errs[i] = cl.StreamUDP(sctx, netip.AddrPortFrom(a, 9090), 10*time.Millisecond)
		}()
	}
	wg.Wait()
	stopWatch()
	for i, w := range ws {
		<-w.done
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		rep := reports[i]
		states := map[string]int{}
		var seq []string
		for _, ev := range w.events {
			states[ev.State]++
			seq = append(seq, ev.State)
			// The entries were resolved before the stream: INCOMPLETE or FAILED means the answer got lost.
			if ev.State == "FAILED" || ev.State == "INCOMPLETE" || ev.State == "DELETED" {
				t.Errorf("%s: the client's entry went %s at %s", w.addr, ev.State, ev.At.Format("15:04:05.000"))
			}
			if ev.MAC != nil && nodeByMAC(ev.MAC) != owner[w.addr] {
				t.Errorf("%s: the client's entry points at %s (%s), the announcer is %s", w.addr, ev.MAC, nodeByMAC(ev.MAC), owner[w.addr])
			}
		}
		t.Logf("NUD %s for %v: sent %d, answered %d, longest gap %v; neighbour states %v (%s)",
			w.addr, d, rep.Sent, rep.Received, rep.MaxGap.Round(time.Millisecond), states, strings.Join(seq, " "))
		if len(rep.Unanswered) > 0 {
			t.Errorf("%s: %d of %d datagrams unanswered (first answer after %v): %s", w.addr, len(rep.Unanswered), rep.Sent,
				rep.FirstAnswer.Round(time.Millisecond), seqRanges(rep.Unanswered))
		}
		// The run must have exercised re-verification at least once, or it proves nothing.
		if states["PROBE"] == 0 && states["DELAY"] == 0 {
			t.Errorf("%s: the client never re-verified the entry in %v (states %v): the run is too short to test NUD", w.addr, d, states)
		}
	}
	if t.Failed() {
		return
	}
	fmt.Printf("NUD: no FAILED entry and no datagram lost in %v of one-way UDP to %v\n", d, addrs)
}

// seqRanges writes sorted sequence numbers as ranges: "0-3 17 40-41".
func seqRanges(seqs []int) string {
	var b strings.Builder
	for i := 0; i < len(seqs); {
		j := i
		for j+1 < len(seqs) && seqs[j+1] == seqs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if i == j {
			fmt.Fprintf(&b, "%d", seqs[i])
		} else {
			fmt.Fprintf(&b, "%d-%d", seqs[i], seqs[j])
		}
		i = j + 1
	}
	return b.String()
}
