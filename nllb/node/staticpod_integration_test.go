//go:build integration

package node

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"
)

// TestStaticPodAcceptedByAPIServer: the printed manifest (YAML, as
// `herald nllb static-pod` writes it) is accepted by a server-side dry run
// with strict field validation in kube-system — what the kubelet's mirror
// pod goes through (the priority class and the priority must agree, the
// host paths and probes must validate, the service account admission
// must accept it as a mirror pod) — for several flag sets.
func TestStaticPodAcceptedByAPIServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	admin, err := kubernetes.NewForConfig(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	kc := writeKubelet(t, root)
	for _, tc := range []struct {
		name string
		edit func(*Options)
		sp   StaticPodOptions
	}{
		{name: "defaults", edit: func(o *Options) {}},
		{name: "metrics, probe, patched copy", edit: func(o *Options) {
			o.MetricsAddr = "127.0.0.1:7574"
			o.KubeconfigOut = filepath.Join(root, "var/lib/herald/kubelet-nllb.conf")
		}, sp: StaticPodOptions{LogLevel: "debug", ImagePullPolicy: corev1.PullNever}},
		{name: "konnectivity, IPv6, extra paths, own name", edit: func(o *Options) {
			o.Konnectivity, o.Loopback, o.MetricsAddr = true, LoopbackIPv6, "[::1]:7574"
			o.WatchEndpoints, o.StateFilePoll = true, 0
		}, sp: StaticPodOptions{Name: "nllb", HostPaths: []string{"/var/lib/kubelet/pki", "/etc/ssl/certs"}}},
	} {
		o := DefaultOptions()
		o.KubeconfigIn = kc
		tc.edit(&o)
		tc.sp.Image = "localhost/herald:dev"
		pod, err := StaticPod(o, tc.sp)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		manifest, err := yaml.Marshal(pod)
		if err != nil {
			t.Fatal(err)
		}
		body, err := yaml.YAMLToJSON(manifest)
		if err != nil {
			t.Fatal(err)
		}
		// What the kubelet sends for a static pod: its mirror pod, marked by
		// the mirror annotation and bound to the node (the service account
		// admission then leaves it alone, and refuses it if it named a
		// service account or mounted a token).
		var obj map[string]any
		if err := json.Unmarshal(body, &obj); err != nil {
			t.Fatal(err)
		}
		meta := obj["metadata"].(map[string]any)
		meta["name"] = meta["name"].(string) + "-n1"
		meta["annotations"] = map[string]any{corev1.MirrorPodAnnotationKey: "test", "kubernetes.io/config.source": "file"}
		obj["spec"].(map[string]any)["nodeName"] = "n1"
		if body, err = json.Marshal(obj); err != nil {
			t.Fatal(err)
		}
		res := admin.CoreV1().RESTClient().Post().Namespace(pod.Namespace).Resource("pods").
			Param("dryRun", "All").Param("fieldValidation", "Strict").Body(body).Do(ctx)
		if err := res.Error(); err != nil {
			t.Fatalf("%s: the API server refuses the manifest: %v\n%s", tc.name, err, manifest)
		}
		raw, _ := res.Raw()
		var got corev1.Pod
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.PriorityClassName != "system-node-critical" || got.Spec.Priority == nil || *got.Spec.Priority != 2000001000 ||
			len(got.Spec.Volumes) != len(pod.Spec.Volumes) {
			t.Errorf("%s: stored as %+v", tc.name, got.Spec)
		}
	}
}
