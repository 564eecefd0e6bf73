package metallb

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/herald-lb/herald/internal/termsafe"
)

// MarkdownTable renders Table as a Markdown table, for docs/metallb.md.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| MetalLB kind | Field | Herald | How, or why |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, r := range Table {
		kind := r.Kind
		if r.Kind == "BGPPeer" {
			kind += " " + r.Version
		}
		field := "(the whole kind)"
		if r.Field != "" {
			field = "`" + r.Field + "`"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", kind, field, r.Disposition, strings.ReplaceAll(r.Text, "|", `\|`))
	}
	return b.String()
}

// Manifests returns the objects to write, as JSON objects without status
// and empty fields: the Secrets, then each kind in config.Kinds' order.
func (r *Result) Manifests() ([]map[string]any, error) {
	var out []map[string]any
	for _, s := range r.Secrets {
		out = append(out, s.Object)
	}
	var typed []any
	for i := range r.Objects.Pools {
		typed = append(typed, &r.Objects.Pools[i])
	}
	for i := range r.Objects.L2Advertisements {
		typed = append(typed, &r.Objects.L2Advertisements[i])
	}
	for i := range r.Objects.BGPAdvertisements {
		typed = append(typed, &r.Objects.BGPAdvertisements[i])
	}
	for i := range r.Objects.Peers {
		typed = append(typed, &r.Objects.Peers[i])
	}
	for i := range r.Objects.Communities {
		typed = append(typed, &r.Objects.Communities[i])
	}
	for i := range r.Objects.BFDProfiles {
		typed = append(typed, &r.Objects.BFDProfiles[i])
	}
	for _, o := range typed {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, fmt.Errorf("rendering %T: %w", o, err)
		}
		delete(u, "status")
		if md, ok := u["metadata"].(map[string]any); ok {
			delete(md, "creationTimestamp")
		}
		out = append(out, u)
	}
	return out, nil
}

// WriteYAML writes the objects as a multi-document YAML stream, for
// kubectl apply -f.
func (r *Result) WriteYAML(w io.Writer) error {
	objs, err := r.Manifests()
	if err != nil {
		return err
	}
	if _, err := io.WriteString(w, "# Herald's configuration, converted from MetalLB's by herald migrate.\n"); err != nil {
		return err
	}
	for _, o := range objs {
		b, err := termsafe.MarshalYAML(o) // yaml.Marshal refuses DEL and C1 controls
		if err != nil {
			return fmt.Errorf("writing %s as YAML: %w", manifestName(o), err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

// manifestName names a manifest of Manifests: "Kind namespace/name".
func manifestName(o map[string]any) string {
	md, _ := o["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	name, _ := md["name"].(string)
	kind, _ := o["kind"].(string)
	return fmt.Sprintf("%s %s/%s", kind, ns, name)
}
