//go:build integration

package crdtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/herald-lb/herald/config/configobjs"
	"github.com/herald-lb/herald/config/v1beta1"
	"github.com/herald-lb/herald/internal/crdschema"
	"github.com/herald-lb/herald/internal/kubeapi"
)

var srv *kubeapi.Server

func TestMain(m *testing.M) {
	os.Exit(kubeapi.RunTests(m, "herald-config-it-", "../crd", &srv))
}

// TestSchemaAdmitsOnlyReadableValuesAPIServer is TestSchemaAdmitsOnlyReadableValues against a real
// kube-apiserver with the generated CRDs installed: every probe is sent as a create (spec fields; status
// fields of the status kinds) or a status update (status fields of the configuration kinds). What the
// server admits is written for real and read back with the typed client, then judged by config.Parse;
// what it refuses must be refused naming the field. The server's verdict must also be the in-process
// validator's (the fuzz target's oracle).
func TestSchemaAdmitsOnlyReadableValuesAPIServer(t *testing.T) {
	kinds := loadKinds(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	rc := rawClient(t)
	typed, err := client.New(srv.Config, client.Options{Scheme: scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	ns := "herald-system"
	if err := rc.Post().AbsPath("/api/v1/namespaces").Body([]byte(`{"metadata":{"name":"` + ns + `"}}`)).Do(ctx).Error(); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	probes := SchemaProbes(t, kinds)
	var admitted, refused, disagree atomic.Int64
	// Eight probes at a time: each is a few requests, and the server's
	// verdicts do not depend on each other (every probe has its own name).
	work := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				probeAPIServer(ctx, t, kinds, rc, typed, ns, i, probes[i], &admitted, &refused, &disagree)
			}
		})
	}
	for i := range probes {
		work <- i
	}
	close(work)
	wg.Wait()
	t.Logf("%d probes over %d kinds against the API server: %d admitted, %d refused, %d verdicts unlike the in-process validator's",
		len(probes), len(kinds), admitted.Load(), refused.Load(), disagree.Load())
}

// probeAPIServer sends one probe and judges the verdict.
func probeAPIServer(ctx context.Context, t *testing.T, kinds []*crdschema.Kind, rc *rest.RESTClient, typed client.Client, ns string,
	i int, p SchemaProbe, admitted, refused, disagree *atomic.Int64) {
	k := crdschema.Find(kinds, p.Kind)
	name := fmt.Sprintf("probe-%d", i)
	p.Obj["metadata"] = map[string]any{"name": name, "namespace": ns}
	base := "/apis/" + k.Group + "/" + k.Version + "/namespaces/" + ns + "/" + k.Plural
	statusOfConfig := p.Field.Path[0] == "status" && configobjs.New(p.Kind) != nil

	var err error
	if statusOfConfig {
		// Status goes through the status subresource: create the
		// object with a valid spec, then update its status.
		create := SchemaBase(p.Kind)
		create["metadata"] = map[string]any{"name": name, "namespace": ns}
		if err := post(ctx, rc, base, create, false); err != nil {
			t.Errorf("%s: creating the object: %v", p, err)
			return
		}
		err = putStatus(ctx, rc, base+"/"+name, p.Obj)
	} else {
		err = post(ctx, rc, base, p.Obj, false)
	}
	inProcess, _ := k.Admit(p.Obj)
	if (err == nil) != (len(inProcess) == 0) {
		disagree.Add(1)
		t.Errorf("%s: the API server says %v, the in-process validator %v", p, err, inProcess.ToAggregate())
	}
	switch {
	case err == nil:
		admitted.Add(1)
		obj := configobjs.New(p.Kind)
		if obj == nil {
			obj = StatusObject(t, p.Kind)
		}
		if gerr := typed.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); gerr != nil {
			t.Errorf("%s: admitted, but the typed client cannot read it back: %v", p, gerr)
		} else {
			raw, _ := json.Marshal(obj)
			CheckAdmitted(t, p, p.Kind, raw)
		}
	default:
		refused.Add(1)
		var se apierrors.APIStatus
		if !errors.As(err, &se) || se.Status().Details == nil {
			t.Errorf("%s: refused without details: %v", p, err)
			break
		}
		var rs []Refusal
		for _, c := range se.Status().Details.Causes {
			path := c.Field
			if path == "<nil>" {
				path = ""
			}
			rs = append(rs, Refusal{Path: path, Detail: c.Message})
		}
		CheckRefusal(t, p, rs)
	}
	_ = rc.Delete().AbsPath(base + "/" + name).Do(ctx).Error()
}

func scheme(t *testing.T) *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// rawClient sends and receives JSON as it is: the probes are not Go types.
func rawClient(t *testing.T) *rest.RESTClient {
	cfg := rest.CopyConfig(srv.Config)
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	cfg.ContentType = "application/json"
	rc, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func post(ctx context.Context, rc *rest.RESTClient, path string, obj map[string]any, dryRun bool) error {
	body, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	req := rc.Post().AbsPath(path).Body(body)
	if dryRun {
		req = req.Param("dryRun", "All")
	}
	return statusError(req.Do(ctx))
}

// statusError is the result's error with the API server's Status (its
// causes name the fields) decoded from the body.
func statusError(res rest.Result) error {
	err := res.Error()
	if err == nil {
		return nil
	}
	raw, _ := res.Raw()
	var st metav1.Status
	if json.Unmarshal(raw, &st) == nil && st.Kind == "Status" {
		return &apierrors.StatusError{ErrStatus: st}
	}
	return err
}

func putStatus(ctx context.Context, rc *rest.RESTClient, path string, obj map[string]any) error {
	cur := map[string]any{}
	raw, err := rc.Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &cur); err != nil {
		return err
	}
	cur["status"] = obj["status"]
	body, err := json.Marshal(cur)
	if err != nil {
		return err
	}
	return statusError(rc.Put().AbsPath(path + "/status").Body(body).Do(ctx))
}
