package discovery

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/herald-lb/herald/internal/logbuf"
)

func next(t *testing.T, ch <-chan []netip.AddrPort) []netip.AddrPort {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(10 * time.Second):
		t.Fatal("no Apply call")
		return nil
	}
}

// TestWatcherAppliesChangesOnly (fake clientset): the first list applies
// the endpoints plus the seed; a failed Apply is retried without a new
// event; an event that leaves the set as it is applies nothing; an edit
// applies the new set; a slice with nothing ready applies nothing.
func TestWatcherAppliesChangesOnly(t *testing.T) {
	https := map[string]int32{"https": 6443}
	s := slice("kubernetes", discoveryv1.AddressTypeIPv4, https, ep{addrs: []string{"10.0.0.11"}})
	cs := fake.NewClientset(s)
	calls := make(chan []netip.AddrPort, 10)
	fail := true
	w := &Watcher{
		Client: cs, Seeds: aps("192.0.2.1:6443"), RetryInterval: 50 * time.Millisecond,
		Apply: func(ups []netip.AddrPort) error {
			calls <- ups
			if fail {
				fail = false
				return errors.New("disk full")
			}
			return nil
		},
		Logger: slog.New(slog.NewTextHandler(&logbuf.Buffer{}, nil)),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	want := aps("10.0.0.11:6443", "192.0.2.1:6443")
	for i := range 2 { // the failed Apply, then its retry
		if got := next(t, calls); !slices.Equal(got, want) {
			t.Fatalf("Apply %d: %v, want %v", i, got, want)
		}
	}

	sl := cs.DiscoveryV1().EndpointSlices(Namespace)
	// Same endpoints, another annotation: no Apply. Then an edit: one
	// Apply, and it must be the first call after the no-op event.
	s.Annotations = map[string]string{"touched": "yes"}
	if _, err := sl.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	notReady := false
	s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.0.0.12"}},
		discoveryv1.Endpoint{Addresses: []string{"10.0.0.13"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}})
	if _, err := sl.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = aps("10.0.0.11:6443", "10.0.0.12:6443", "192.0.2.1:6443")
	if got := next(t, calls); !slices.Equal(got, want) {
		t.Fatalf("after the edit: %v, want %v", got, want)
	}

	// Nothing ready: no Apply; the next real change is the next call.
	s.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.0.0.11"}, Conditions: discoveryv1.EndpointConditions{Ready: &notReady}}}
	if _, err := sl.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := sl.Create(ctx, slice("kubernetes-2", discoveryv1.AddressTypeIPv4, https, ep{addrs: []string{"10.0.0.14"}}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want = aps("10.0.0.14:6443", "192.0.2.1:6443")
	if got := next(t, calls); !slices.Equal(got, want) {
		t.Fatalf("after nothing ready and a second slice: %v, want %v", got, want)
	}
}

// TestWatcherForbiddenLoggedOnce (fake clientset answering every list with
// Forbidden): one error naming the RBAC, the retries at debug level only,
// and no Apply.
func TestWatcherForbiddenLoggedOnce(t *testing.T) {
	cs := fake.NewClientset()
	var lists sync.WaitGroup
	lists.Add(3)
	var n int
	var mu sync.Mutex
	cs.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		if n++; n <= 3 {
			defer lists.Done()
		}
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "",
			errors.New(`User "system:node:n1" cannot list resource "endpointslices"`))
	})
	logs := &logbuf.Buffer{}
	w := &Watcher{
		Client: cs,
		Apply:  func([]netip.AddrPort) error { t.Error("Apply called while forbidden"); return nil },
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	lists.Wait() // three lists refused: the reflector retried twice
	// The handler of the third list's error may still be running.
	deadline := time.Now().Add(5 * time.Second)
	for logs.Count("forbidden") < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := logs.Count("level=ERROR", "forbidden", "system:nodes", "endpointslices"); got != 1 {
		t.Errorf("%d errors naming the RBAC, want 1", got)
	}
	if got := logs.Count("level=DEBUG", "still forbidden"); got < 2 {
		t.Errorf("%d debug lines for the retries, want at least 2", got)
	}
}

// TestWatcherSeedsFunc: seeds that change are merged in at the next
// resync, without any slice event; an unchanged resync applies the same
// set again (Apply is idempotent), which callers see as a no-op.
func TestWatcherSeedsFunc(t *testing.T) {
	s := slice("kubernetes", discoveryv1.AddressTypeIPv4, map[string]int32{"https": 6443}, ep{addrs: []string{"10.0.0.11"}})
	cs := fake.NewClientset(s)
	calls := make(chan []netip.AddrPort, 100)
	var mu sync.Mutex
	seeds := aps("192.0.2.1:6443")
	w := &Watcher{
		Client: cs, Resync: 50 * time.Millisecond,
		SeedsFunc: func() []netip.AddrPort { mu.Lock(); defer mu.Unlock(); return seeds },
		Apply:     func(ups []netip.AddrPort) error { calls <- ups; return nil },
		Logger:    slog.New(slog.DiscardHandler),
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	if got, want := next(t, calls), aps("10.0.0.11:6443", "192.0.2.1:6443"); !slices.Equal(got, want) {
		t.Fatalf("first: %v, want %v", got, want)
	}
	mu.Lock()
	seeds = aps("192.0.2.2:6443")
	mu.Unlock()
	want := aps("10.0.0.11:6443", "192.0.2.2:6443")
	deadline := time.Now().Add(10 * time.Second)
	for got := next(t, calls); !slices.Equal(got, want); got = next(t, calls) {
		if time.Now().After(deadline) {
			t.Fatalf("the new seed not applied: last %v", got)
		}
	}
}
