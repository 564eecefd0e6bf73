package charts

// The chart's values schema (herald/values.schema.json), checked without helm and without a cluster (a plain unit
// test, part of `make test`): the schema and values.yaml describe the same keys, every values file and values
// example the repository shows passes it, and typical mistakes are refused with the path Helm would print.
// Validation uses the JSON Schema library helm v3.22 uses (github.com/santhosh-tekuri/jsonschema/v6, the version
// in helm.sh/helm/v3@v3.22.0's go.mod), compiled and fed the way helm's chartutil.ValidateAgainstSingleSchema
// does: values parsed with sigs.k8s.io/yaml (numbers as float64), merged over values.yaml with helm's rule that a
// null removes a key, and the error text helm prints ("at '/path': message").

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/yaml"
)

const (
	schemaFile = "herald/values.schema.json"
	valuesFile = "herald/values.yaml"
)

// compileSchema compiles the chart's schema as helm does (the same resource URL, so messages match).
func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///values.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile("file:///values.schema.json")
	if err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return s
}

// readValues parses values YAML as helm's chartutil.ReadValues does.
func readValues(t *testing.T, name string, data []byte) map[string]any {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return m
}

func defaultValues(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	return readValues(t, valuesFile, data)
}

// coalesce returns user's values over the defaults as helm merges them before it validates: maps merge key by
// key, anything else replaces, and a null removes the key (`--set ccm.nodeSelector=null`).
func coalesce(defaults, user map[string]any) map[string]any {
	out := make(map[string]any, len(defaults))
	for k, v := range defaults {
		out[k] = v
	}
	for k, v := range user {
		if v == nil {
			delete(out, k)
			continue
		}
		um, uok := v.(map[string]any)
		dm, dok := out[k].(map[string]any)
		if uok && dok {
			out[k] = coalesce(dm, um)
			continue
		}
		out[k] = v
	}
	return out
}

// validate returns helm's message for values that the schema refuses ("" when accepted).
func validate(s *jsonschema.Schema, values map[string]any) string {
	err := s.Validate(any(values))
	if err == nil {
		return ""
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err.Error()
	}
	// helm prints Error() without the first line naming the schema.
	msg := ve.Error()
	if _, rest, ok := strings.Cut(msg, "\n"); ok {
		msg = rest
	}
	return msg
}

// node is what the drift check needs of one schema object: its declared properties (after $ref and allOf) and
// whether it is closed (additionalProperties: false, the chart's own objects) or open (Kubernetes objects, maps).
type node struct {
	props  map[string]map[string]any
	closed bool
}

func resolve(root, s map[string]any) node {
	n := node{props: map[string]map[string]any{}}
	var visit func(s map[string]any, depth int)
	visit = func(s map[string]any, depth int) {
		if depth > 16 {
			return
		}
		if ref, ok := s["$ref"].(string); ok {
			// draft-07: the keywords beside $ref are ignored (descriptions only, here).
			target := root
			for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
				target, _ = target[part].(map[string]any)
			}
			if target != nil {
				visit(target, depth+1)
			}
			return
		}
		if p, ok := s["properties"].(map[string]any); ok {
			for k, v := range p {
				if m, ok := v.(map[string]any); ok {
					n.props[k] = m
				}
			}
		}
		if ap, ok := s["additionalProperties"].(bool); ok && !ap {
			n.closed = true
		}
		if all, ok := s["allOf"].([]any); ok {
			for _, a := range all {
				if m, ok := a.(map[string]any); ok {
					visit(m, depth+1)
				}
			}
		}
	}
	visit(s, 0)
	return n
}

func loadSchemaJSON(t *testing.T) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(schemaFile)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("%s: %v", schemaFile, err)
	}
	return m
}

// schemaDrift lists the keys of values that the schema does not describe (below a closed object, a key that is
// not a declared property) and the properties of closed objects that values lacks. Lists are not entered: their
// entries are Kubernetes objects or configuration entries that values.yaml leaves empty. Open objects (resources,
// selectors, annotations, affinity, ...) take any key, and their declared properties are optional.
func schemaDrift(root map[string]any, values map[string]any) (undescribed, missing []string) {
	var walk func(path string, s map[string]any, v map[string]any)
	walk = func(path string, s map[string]any, v map[string]any) {
		n := resolve(root, s)
		for _, k := range sortedKeys(v) {
			ps, ok := n.props[k]
			if !ok {
				if n.closed {
					undescribed = append(undescribed, path+k)
				}
				continue
			}
			if vm, ok := v[k].(map[string]any); ok {
				walk(path+k+".", ps, vm)
			}
		}
		if !n.closed {
			return
		}
		for _, k := range sortedKeys(n.props) {
			if _, ok := v[k]; !ok {
				missing = append(missing, path+k)
			}
		}
	}
	walk("", root, values)
	return undescribed, missing
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// undocumented lists the schema's properties (anywhere, definitions included) that have no description.
func undocumented(s any, path string) []string {
	var out []string
	switch s := s.(type) {
	case map[string]any:
		for _, k := range sortedKeys(s) {
			if k == "properties" {
				if props, ok := s[k].(map[string]any); ok {
					for _, p := range sortedKeys(props) {
						pm, _ := props[p].(map[string]any)
						if d, _ := pm["description"].(string); strings.TrimSpace(d) == "" {
							out = append(out, path+"/properties/"+p)
						}
					}
				}
			}
			out = append(out, undocumented(s[k], path+"/"+k)...)
		}
	case []any:
		for i, v := range s {
			out = append(out, undocumented(v, fmt.Sprintf("%s/%d", path, i))...)
		}
	}
	return out
}

// TestValuesSchemaMatchesValues: every key of values.yaml is described by the schema and every property of the
// chart's own objects in the schema is in values.yaml, each with a description, so the two cannot drift apart.
func TestValuesSchemaMatchesValues(t *testing.T) {
	root := loadSchemaJSON(t)
	undescribed, missing := schemaDrift(root, defaultValues(t))
	for _, k := range undescribed {
		t.Errorf("values.yaml has %s, which %s does not describe (add it to the schema)", k, schemaFile)
	}
	for _, k := range missing {
		t.Errorf("%s describes %s, which values.yaml lacks (add it with its default and a comment, or drop it from the schema)", schemaFile, k)
	}
	for _, p := range undocumented(root, "#") {
		t.Errorf("%s: %s has no description", schemaFile, p)
	}
}

// TestValuesFilesPassSchema: values.yaml, the chart's ci/ values, the lab's values and every values example of
// the READMEs pass the schema, merged over values.yaml as helm merges them.
func TestValuesFilesPassSchema(t *testing.T) {
	s := compileSchema(t)
	defaults := defaultValues(t)
	if msg := validate(s, defaults); msg != "" {
		t.Errorf("%s fails its own schema:\n%s", valuesFile, msg)
	}
	files, err := filepath.Glob("herald/ci/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../e2e/lab/manifests/herald-values.yaml")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if msg := validate(s, coalesce(defaults, readValues(t, f, data))); msg != "" {
			t.Errorf("%s fails the schema:\n%s", f, msg)
		}
	}
	for _, md := range []string{"../README.md", "herald/README.md"} {
		blocks, err := valuesExamples(md, topLevelKeys(defaults))
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 {
			t.Errorf("%s: no values example found (has the recognition rule in valuesExamples stopped matching?)", md)
		}
		for _, b := range blocks {
			if b.nearMiss != "" {
				t.Errorf("%s:%d: a yaml block with the top-level key %s, close to the values key %s: a misspelled values example?",
					md, b.line, b.key, b.nearMiss)
				continue
			}
			if !b.values {
				continue
			}
			if msg := validate(s, coalesce(defaults, readValues(t, fmt.Sprintf("%s:%d", md, b.line), []byte(b.text)))); msg != "" {
				t.Errorf("%s:%d: the values example fails the schema:\n%s\n%s", md, b.line, b.text, msg)
			}
		}
		n := 0
		for _, b := range blocks {
			if b.values {
				n++
			}
		}
		t.Logf("%s: %d values examples checked, %d other yaml blocks", md, n, len(blocks)-n)
	}
}

func topLevelKeys(m map[string]any) map[string]bool {
	keys := map[string]bool{}
	for k := range m {
		keys[k] = true
	}
	return keys
}

// yamlBlock is one YAML document of a ```yaml block of a Markdown file.
type yamlBlock struct {
	line     int    // the fence's line
	text     string // the document, the fence's indentation removed
	values   bool   // a Helm values example
	key      string // with nearMiss: the top-level key that looks misspelled
	nearMiss string // a values.yaml top-level key within two edits of key, when the block is not a values example
}

// valuesExamples returns the YAML documents of the ```yaml blocks of a Markdown file, marking those that are Helm
// values examples. The rule: a document is a values example when it is a mapping and at least one of its
// top-level keys is a top-level key of values.yaml (configuration, nllb, ccm, serviceLB, ...). Its other keys,
// at every depth, are then the schema's to judge, so a misspelled key below a right one fails. Documents with
// none of those keys are something else: Kubernetes manifests (apiVersion, kind, metadata, spec), kubelet
// configuration, spec fragments. So that an example whose only top-level key is misspelled is not skipped
// silently, such a document whose top-level key is within two edits of a values.yaml key is reported (nearMiss).
func valuesExamples(md string, valuesKeys map[string]bool) ([]yamlBlock, error) {
	f, err := os.Open(md)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		out    []yamlBlock
		in     bool
		indent string
		start  int
		doc    []string
	)
	flush := func() {
		text := strings.Join(doc, "\n") + "\n"
		doc = nil
		var m map[string]any
		if strings.TrimSpace(text) == "" || yaml.Unmarshal([]byte(text), &m) != nil || len(m) == 0 {
			return
		}
		b := yamlBlock{line: start, text: text}
		for _, k := range sortedKeys(m) {
			if valuesKeys[k] {
				b.values = true
			}
		}
		if !b.values {
		near:
			for _, k := range sortedKeys(m) {
				for _, vk := range sortedKeys(valuesKeys) {
					if editDistance(strings.ToLower(k), strings.ToLower(vk)) <= 2 {
						b.key, b.nearMiss = k, vk
						break near
					}
				}
			}
		}
		out = append(out, b)
	}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(trimmed, "```yaml"):
			in, start = true, n
			indent = line[:len(line)-len(strings.TrimLeft(line, " "))]
		case in && trimmed == "```":
			flush()
			in = false
		case in && trimmed == "---":
			flush()
		case in:
			doc = append(doc, strings.TrimPrefix(line, indent))
		}
	}
	return out, sc.Err()
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// TestValuesSchemaRefuses: typical mistakes are refused, each with the path and the reason helm prints.
func TestValuesSchemaRefuses(t *testing.T) {
	s := compileSchema(t)
	defaults := defaultValues(t)
	for _, tc := range []struct {
		name, values string
		want         string // "at '<path>': <reason>", as helm prints it
	}{
		{"misspelled key", "speaker: {tolerationz: [{operator: Exists}]}", "at '/speaker': additional properties 'tolerationz' not allowed"},
		{"misspelled top-level key", "logLevle: debug", "at '': additional properties 'logLevle' not allowed"},
		{"misspelled nested key", "nllb: {health: {intervall: 1s}}", "at '/nllb/health': additional properties 'intervall' not allowed"},
		{"misspelled configuration kind", "configuration: {ipAddresspools: []}", "at '/configuration': additional properties 'ipAddresspools' not allowed"},
		{"misspelled configuration entry key", "configuration: {ipAddressPools: [{name: lan, specs: {addresses: [192.0.2.0/28]}}]}",
			"at '/configuration/ipAddressPools/0': additional properties 'specs' not allowed"},
		{"configuration entry without a name", "configuration: {l2Advertisements: [{spec: {}}]}",
			"at '/configuration/l2Advertisements/0': missing property 'name'"},
		{"wrong type: string for integer", "controller: {replicas: two}", "at '/controller/replicas': got string, want integer"},
		{"wrong type: fraction for integer", "controller: {workers: 1.5}", "at '/controller/workers': got number, want integer"},
		{"wrong type: string for boolean", `webhook: {enabled: "yes"}`, "at '/webhook/enabled': got string, want boolean"},
		{"wrong type: number for image tag", "image: {tag: 1.10}", "at '/image/tag': got number, want string"},
		{"wrong type: number for duration", "nllb: {dialTimeout: 2}", "at '/nllb/dialTimeout': got number, want string"},
		{"wrong type: scalar for list", "speaker: {l2ExcludeInterfaces: docker0}", "at '/speaker/l2ExcludeInterfaces': got string, want array"},
		{"wrong type: string for pull secret", "imagePullSecrets: [regcred]", "at '/imagePullSecrets/0': got string, want object"},
		{"wrong type: boolean in a node selector", "speaker: {nodeSelector: {enablelb: true}}", "at '/speaker/nodeSelector/enablelb': got boolean, want string"},
		{"port above range", "memberlist: {port: 70000}", "at '/memberlist/port': maximum: got 70,000, want 65,535"},
		{"port zero", "controller: {metricsPort: 0}", "at '/controller/metricsPort': minimum: got 0, want 1"},
		{"nllb port above range", "nllb: {konnectivity: {upstreamPort: 65536}}", "at '/nllb/konnectivity/upstreamPort': maximum: got 65,536, want 65,535"},
		{"webhook timeout above 30 s", "webhook: {timeoutSeconds: 60}", "at '/webhook/timeoutSeconds': maximum: got 60, want 30"},
		{"root controller", "controller: {runAsUser: 0}", "at '/controller/runAsUser': minimum: got 0, want 1"},
		{"bad log level", "logLevel: verbose", "at '/logLevel': value must be one of 'debug', 'info', 'warn', 'error'"},
		{"bad profile", "memberlist: {profile: slow}", "at '/memberlist/profile': value must be one of 'auto', 'fast', 'default'"},
		{"bad failure policy (case)", "webhook: {failurePolicy: fail}", "at '/webhook/failurePolicy': value must be one of 'Ignore', 'Fail'"},
		{"bad pull policy", "image: {pullPolicy: always}", "at '/image/pullPolicy': value must be one of 'Always', 'IfNotPresent', 'Never'"},
		{"bad loopback", "nllb: {loopback: ipv5}", "at '/nllb/loopback': value must be one of 'auto', 'ipv4', 'ipv6'"},
		{"bad health mode", "nllb: {health: {mode: http}}", "at '/nllb/health/mode': value must be one of 'readyz', 'tcp'"},
		{"duration without unit", "nllb: {health: {interval: \"500\"}}", "at '/nllb/health/interval': '500' does not match pattern"},
		{"bad quantity", `controller: {resources: {limits: {memory: "256 MB"}}}`, "at '/controller/resources/limits/memory': '256 MB' does not match pattern"},
		{"negative quantity", "speaker: {resources: {requests: {cpu: -1}}}", "at '/speaker/resources/requests/cpu': minimum: got -1, want 0"},
		{"upstream without port", "nllb: {upstreams: [192.0.2.10]}", "at '/nllb/upstreams/0': '192.0.2.10' does not match pattern"},
		{"relative host path", "nllb: {stateDir: var/lib/herald}", "at '/nllb/stateDir': 'var/lib/herald' does not match pattern"},
		{"tunables not name=value", "memberlist: {tunables: ProbeInterval}", "at '/memberlist/tunables': 'ProbeInterval' does not match pattern"},
		{"tag in the repository", "image: {repository: herald:v1}", "at '/image/repository': 'herald:v1' does not match pattern"},
		{"upper-case namespace", "serviceLB: {namespace: Herald-LB}", "at '/serviceLB/namespace': 'Herald-LB' does not match pattern"},
		{"ServiceMonitor interval", "metrics: {serviceMonitor: {interval: 30}}", "at '/metrics/serviceMonitor/interval': got number, want string"},
		{"alert for, units out of order", "metrics: {prometheusRule: {alerts: {bgpSessionDown: {for: 1m1h}}}}",
			"at '/metrics/prometheusRule/alerts/bgpSessionDown/for': '1m1h' does not match pattern"},
		{"pool ratio as a percentage", "metrics: {prometheusRule: {alerts: {poolNearlyFull: {usedRatio: 90}}}}",
			"at '/metrics/prometheusRule/alerts/poolNearlyFull/usedRatio': maximum: got 90, want 1"},
		{"unknown unannounced reason", "metrics: {prometheusRule: {alerts: {addressNotAnnounced: {ignoreReasons: [NoEndpoint]}}}}",
			"at '/metrics/prometheusRule/alerts/addressNotAnnounced/ignoreReasons/0': value must be one of"},
		{"misspelled alert", "metrics: {prometheusRule: {alerts: {bgpSessionsDown: {enabled: false}}}}",
			"at '/metrics/prometheusRule/alerts': additional properties 'bgpSessionsDown' not allowed"},
		{"dashboard label not a string", "metrics: {dashboard: {labels: {grafana_dashboard: 1}}}",
			"at '/metrics/dashboard/labels/grafana_dashboard': got number, want string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := validate(s, coalesce(defaults, readValues(t, tc.name, []byte(tc.values))))
			if msg == "" {
				t.Fatalf("%s: accepted, want refused with %q", tc.values, tc.want)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("%s: refused with\n%s\nwant %q", tc.values, msg, tc.want)
			}
		})
	}
}

// TestValuesSchemaAccepts: values the templates take are not refused, including the Go types `--set` produces
// (int64, bool, nil) and the forms Kubernetes quantities and Go durations may take.
func TestValuesSchemaAccepts(t *testing.T) {
	s := compileSchema(t)
	defaults := defaultValues(t)
	for _, tc := range []struct {
		name   string
		values map[string]any
	}{
		{"--set integers and booleans", map[string]any{
			"controller": map[string]any{"replicas": int64(3), "workers": int64(8), "leaderElection": false},
			"memberlist": map[string]any{"port": int64(7946)},
		}},
		{"--set null removes the ccm node selector", map[string]any{"ccm": map[string]any{"enabled": true, "nodeSelector": nil}}},
		{"quantities as numbers and strings", map[string]any{"speaker": map[string]any{"resources": map[string]any{
			"requests": map[string]any{"cpu": float64(1), "memory": "128974848"},
			"limits":   map[string]any{"cpu": "1.5", "memory": "1Gi", "ephemeral-storage": "2e3"},
		}}}},
		{"durations and addresses", map[string]any{"nllb": map[string]any{
			"patchedKubeconfigResync": "1h30m", "dialTimeout": "1.5s", "metricsAddress": ":7574",
			"upstreams": []any{"[fd00::10]:6443", "192.0.2.10:6443"},
			"health":    map[string]any{"interval": "0", "timeout": "250ms"},
		}}},
		{"alerts and dashboard from --set", map[string]any{"metrics": map[string]any{
			"prometheusRule": map[string]any{"enabled": true, "alerts": map[string]any{
				"webhookCertificateExpiring": map[string]any{"remainingDays": int64(7), "for": "0"},
				"poolNearlyFull":             map[string]any{"usedRatio": float64(1), "for": "1h30m"},
				"addressNotAnnounced":        map[string]any{"ignoreReasons": []any{}},
			}},
			"dashboard": map[string]any{"enabled": true, "namespace": "monitoring", "labels": map[string]any{"grafana_dashboard": "1", "team": "net"}},
		}}},
		{"image with a registry port", map[string]any{"image": map[string]any{"repository": "registry.example:5000/herald", "tag": "v0.1.0"}}},
		{"Kubernetes objects stay open", map[string]any{
			"speaker":    map[string]any{"updateStrategy": map[string]any{"type": "RollingUpdate", "rollingUpdate": map[string]any{"maxUnavailable": "10%", "maxSurge": int64(0)}}},
			"controller": map[string]any{"affinity": map[string]any{"podAntiAffinity": map[string]any{}}, "podAnnotations": map[string]any{"example.com/a": "b"}},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if msg := validate(s, coalesce(defaults, tc.values)); msg != "" {
				t.Errorf("%v refused:\n%s", tc.values, msg)
			}
		})
	}
}
