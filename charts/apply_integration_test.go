//go:build integration

package charts

import (
	"context"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// applier applies objects with server-side apply, for real or as a dry run.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}
}

// errNoKind is returned for an object whose kind the API server does not serve.
type errNoKind struct{ obj string }

func (e errNoKind) Error() string { return e.obj + ": the API server serves no such kind" }

// apply server-side applies obj (field manager "herald-chart-test", strict field validation: an unknown or
// duplicate field is an error, not a warning), as a dry run when dryRun.
func (a *applier) apply(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		return errNoKind{objName(obj)}
	}
	if err != nil {
		return fmt.Errorf("%s: %w", objName(obj), err)
	}
	var ri dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ri = a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	body, err := obj.MarshalJSON()
	if err != nil {
		return fmt.Errorf("%s: %w", objName(obj), err)
	}
	opts := metav1.PatchOptions{FieldManager: "herald-chart-test", Force: ptr(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, body, opts); err != nil {
		return fmt.Errorf("%s: %w", objName(obj), err)
	}
	return nil
}

// ensureNamespace creates namespace ns unless it exists.
func (a *applier) ensureNamespace(ctx context.Context, ns string) error {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	err := a.apply(ctx, obj, false)
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func ptr[T any](v T) *T { return &v }
