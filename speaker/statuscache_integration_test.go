//go:build integration

package speaker

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
)

// TestCacheHoldsOnlyThisNodesBGPStatus: the speaker's cache, built from
// cacheOptions against the real API server, holds the ServiceBGPStatus
// objects of its own node and never another node's (one object per Service
// and advertising node: caching every node's sends each create to every
// speaker). The node's name is longer than a label value may be, so the
// selector must use the same hashed value the writer labels with. Another
// node's object is created first and this node's after it: once this
// node's is in the cache, the watch has delivered the other's, had it been
// selected.
func TestCacheHoldsOnlyThisNodesBGPStatus(t *testing.T) {
	e := newEnv(t)
	self := "rack-7." + strings.Repeat("n", 60) + ".example.org"
	o := DefaultOptions()
	o.Namespace, o.NodeName = e.ns, self
	opts := cacheOptions(o)
	opts.Scheme = configobjs.Scheme()
	c, err := cache.New(srv.Config, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		t.Fatal("the cache never synced")
	}
	status := func(name, node string) *v1beta1.ServiceBGPStatus {
		return &v1beta1.ServiceBGPStatus{
			ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name,
				Labels: map[string]string{v1beta1.LabelNode: nodeLabelValue(node)}},
			Status: v1beta1.ServiceBGPStatusStatus{Node: node},
		}
	}
	e.create(status("other", "n2"))
	e.create(status("own", self))
	e.eventually(30*time.Second, "this node's ServiceBGPStatus in the cache", func() string {
		var list v1beta1.ServiceBGPStatusList
		if err := c.List(ctx, &list, client.InNamespace(e.ns)); err != nil {
			return err.Error()
		}
		for _, it := range list.Items {
			if it.Name == "own" {
				return ""
			}
		}
		return "not yet"
	})
	var list v1beta1.ServiceBGPStatusList
	if err := c.List(ctx, &list, client.InNamespace(e.ns)); err != nil {
		t.Fatal(err)
	}
	for _, it := range list.Items {
		if it.Status.Node != self {
			t.Errorf("the cache of %s holds %s, the ServiceBGPStatus of node %s", self, it.Name, it.Status.Node)
		}
	}
}
