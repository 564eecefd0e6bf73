//go:build integration

package charts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/herald-lb/herald/internal/kubeapi"
)

// chartDir is the chart, relative to this package.
const chartDir = "herald"

var srv *kubeapi.Server

func TestMain(m *testing.M) {
	os.Exit(kubeapi.RunTests(m, "herald-chart-it-", filepath.Join(chartDir, "crds"), &srv))
}

// render runs `helm template` of the chart as release "herald" in namespace ns with the extra arguments, and
// returns the objects. The test is skipped when helm is missing (`make integration` builds it).
func render(t *testing.T, ns string, args ...string) []*unstructured.Unstructured {
	t.Helper()
	helm := kubeapi.HelmPath()
	if _, err := os.Stat(helm); err != nil {
		t.Skipf("helm not found at %s (build it with `e2e/lab/install.sh helm`, or set HERALD_HELM): %v", helm, err)
	}
	cmd := exec.Command(helm, append([]string{"template", "herald", chartDir, "--namespace", ns}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	objs, err := decodeAll(out.Bytes())
	if err != nil {
		t.Fatalf("helm template %s: %v", strings.Join(args, " "), err)
	}
	if len(objs) == 0 {
		t.Fatalf("helm template %s rendered nothing", strings.Join(args, " "))
	}
	return objs
}

// decodeAll splits a multi-document YAML stream into objects (empty documents skipped).
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// objName is kind namespace/name, for messages.
func objName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetKind() + " " + o.GetName()
	}
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}
