//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/configobjs"
)

// heraldFixture is the controller and the speakers as a suite finds them, with a client.
type heraldFixture struct {
	c client.Client
}

// shared is the Herald install (controller and speakers) the suites hand on to each other: installing the chart,
// waiting for every pod and uninstalling it again took about 20 s a suite, for the same install each time. A suite
// that wants it calls installSpeakers; one that needs another (the controller alone, other values, an upgrade or an
// uninstall of its own) calls withoutShared before installing, or ownShared to take the shared one over. Suites run
// one after another (none calls t.Parallel), so no lock is needed.
var shared struct {
	remove func(context.Context) error // helm uninstall; nil while no shared install is up
	args   string                      // the HERALD_HELM_ARGS it was installed with
}

// installSpeakers returns the shared install, installing it first when there is none or when it was installed with
// other HERALD_HELM_ARGS, and waits until every speaker is ready and sees every other one in its memberlist view:
// a suite before may have restarted or cut off speakers, and this wait is what each suite starts from.
func installSpeakers(t *testing.T, ctx context.Context) *heraldFixture {
	t.Helper()
	if cluster.Images().Herald == "" {
		t.Fatal("no Herald image in the cluster (the lab could not build ./cmd/herald)")
	}
	args := os.Getenv("HERALD_HELM_ARGS")
	if shared.remove != nil && shared.args != args {
		withoutShared(t, ctx)
	}
	if shared.remove == nil {
		remove, err := cluster.InstallHerald(ctx, true)
		if err != nil {
			t.Fatalf("installing the controller and the speakers: %v", err)
		}
		shared.remove, shared.args = remove, args
	} else {
		t.Logf("Herald is installed already (by a suite before, HERALD_HELM_ARGS %q)", args)
	}
	c, err := client.New(cluster.RESTConfig(), client.Options{Scheme: configobjs.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "every speaker ready and in one memberlist view", func() (bool, error) {
		ds, err := cluster.Kube().AppsV1().DaemonSets("herald-system").Get(ctx, "herald-speaker", metav1.GetOptions{})
		if err != nil || ds.Status.NumberReady != ds.Status.DesiredNumberScheduled || ds.Status.DesiredNumberScheduled == 0 {
			return false, nil
		}
		_, alive, err := announcers(ctx, nil)
		if err != nil {
			return false, nil
		}
		for _, n := range cluster.Nodes() {
			if alive[n.Name] != len(cluster.Nodes()) {
				return false, nil
			}
		}
		return true, nil
	})
	return &heraldFixture{c: c}
}

// withoutShared uninstalls the shared install, if one is up, so that the suite starts from no Herald.
func withoutShared(t *testing.T, ctx context.Context) {
	t.Helper()
	if shared.remove == nil {
		return
	}
	remove := shared.remove
	shared.remove = nil
	if err := remove(ctx); err != nil {
		t.Fatalf("uninstalling the shared Herald install: %v", err)
	}
}

// ownShared hands the shared install over to the suite (which upgrades or uninstalls it): no later suite gets it,
// and it is uninstalled when the suite ends unless the suite did so itself.
func ownShared(t *testing.T) {
	t.Helper()
	remove := shared.remove
	shared.remove = nil
	if remove != nil {
		t.Cleanup(func() { _ = remove(context.Background()) })
	}
}

// removeShared uninstalls the shared install at the end of the run (TestMain), before the cluster goes.
func removeShared() error {
	if shared.remove == nil {
		return nil
	}
	remove := shared.remove
	shared.remove = nil
	if err := remove(context.Background()); err != nil {
		return fmt.Errorf("uninstalling the shared Herald install: %w", err)
	}
	return nil
}
