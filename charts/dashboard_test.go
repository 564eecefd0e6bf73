package charts

// The chart's Grafana dashboard (herald/dashboards/herald.json, rendered by metrics.dashboard) and its alerts
// (herald/templates/prometheusrule.yaml, herald/tests/alerts_test.yaml), checked without Grafana or Prometheus (a
// plain unit test, part of `make test`; `make alerts-check` runs the alerts through promtool): the dashboard is
// valid JSON, every panel's query parses with Prometheus's own PromQL parser, and every herald_ metric the
// dashboard and the alerts read is one the code registers.

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
)

const dashboardFile = "herald/dashboards/herald.json"

type dashPanel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID string `json:"refId"`
		Expr  string `json:"expr"`
	} `json:"targets"`
	Panels []dashPanel `json:"panels"`
}

type dashVar struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Query string `json:"query"`
}

type dashboard struct {
	Title      string `json:"title"`
	UID        string `json:"uid"`
	Templating struct {
		List []dashVar `json:"list"`
	} `json:"templating"`
	Panels []dashPanel `json:"panels"`
}

// grafanaVars are the Grafana variables the queries may use, with a value that stands in for them when parsing.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h")

// registeredMetrics returns the herald_ metric names the code registers: every "herald_..." string literal of the
// module's non-test Go files.
func registeredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(herald_[a-z0-9_]+)"`)
	names := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == ".git" || n == "testdata" || n == "build" || n == "charts" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 20 {
		t.Fatalf("only %d herald_ metric names found in the code: has the scan stopped matching?", len(names))
	}
	return names
}

// known says whether a series name read by a query is a registered metric, or one of a registered histogram's
// series.
func known(registered map[string]bool, name string) bool {
	if registered[name] {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && registered[base] {
			return true
		}
	}
	return false
}

func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	if d.Title == "" || d.UID == "" {
		t.Errorf("title %q, uid %q: both must be set (the sidecar imports by uid)", d.Title, d.UID)
	}
	if !slices.Contains(d.Templating.List, dashVar{Name: "datasource", Type: "datasource", Query: "prometheus"}) {
		t.Errorf("no Prometheus data source variable named datasource")
	}
	registered := registeredMetrics(t)
	read := map[string]bool{}
	ids := map[int]string{}
	queries := 0
	var check func(p dashPanel)
	check = func(p dashPanel) {
		if prev, dup := ids[p.ID]; dup || p.ID == 0 {
			t.Errorf("panel %q: id %d (also %q): ids must be set and unique", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W <= 0 || p.GridPos.H <= 0 || p.GridPos.X < 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, p.GridPos)
		}
		for _, c := range p.Panels {
			check(c)
		}
		if p.Type == "row" {
			return
		}
		if p.Title == "" {
			t.Errorf("panel %d has no title", p.ID)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: its data source must be the ${datasource} variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			if q.RefID == "" || refs[q.RefID] {
				t.Errorf("panel %q: refId %q empty or repeated", p.Title, q.RefID)
			}
			refs[q.RefID] = true
			queries++
			expr, err := parser.ParseExpr(grafanaVars.Replace(q.Expr))
			if err != nil {
				t.Errorf("panel %q, query %s: %v\n%s", p.Title, q.RefID, err, q.Expr)
				continue
			}
			parser.Inspect(expr, func(n parser.Node, _ []parser.Node) error {
				if vs, ok := n.(*parser.VectorSelector); ok {
					read[vs.Name] = true
					if !known(registered, vs.Name) {
						t.Errorf("panel %q, query %s reads %s, which Herald does not export", p.Title, q.RefID, vs.Name)
					}
				}
				return nil
			})
		}
	}
	for _, p := range d.Panels {
		check(p)
	}
	// What the dashboard is for (issue 25): pools, waiting Services, announcements per node, BGP, BFD, memberlist,
	// NLLB, the controller's sync latency and the webhook's answer time.
	for _, m := range []string{"herald_allocator_addresses_in_use", "herald_allocator_addresses", "herald_controller_services_waiting",
		"herald_l2_announced", "herald_bgp_prefixes_advertised", "herald_bgp_session_up", "herald_bfd_session_up",
		"herald_memberlist_members_alive", "herald_nllb_upstream_healthy", "herald_controller_sync_duration_seconds_bucket",
		"herald_webhook_request_duration_seconds_bucket"} {
		if !read[m] {
			t.Errorf("no panel reads %s", m)
		}
	}
	t.Logf("%d panels, %d queries parsed, %d distinct series names read", len(ids), queries, len(read))
}

// TestAlertsReadExportedMetrics: every herald_ name in the alert rules and in their promtool tests is a metric the
// code registers (promtool cannot know: a renamed metric would leave the rules and their tests agreeing on a name
// nothing exports).
func TestAlertsReadExportedMetrics(t *testing.T) {
	registered := registeredMetrics(t)
	name := regexp.MustCompile(`\bherald_[a-z0-9_]+`)
	for _, f := range []string{"herald/templates/prometheusrule.yaml", "herald/tests/alerts_test.yaml"} {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, m := range name.FindAllString(string(src), -1) {
			n++
			if !known(registered, m) {
				t.Errorf("%s reads %s, which Herald does not export", f, m)
			}
		}
		if n == 0 {
			t.Errorf("%s names no herald_ metric", f)
		}
	}
}
