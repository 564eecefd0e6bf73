package metallb

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// metallbModule is the MetalLB release the table describes.
const metallbModule = "go.universe.tf/metallb@v0.16.2"

// metallbDir returns the directory of MetalLB's source in the module cache,
// downloading it from the module proxy when needed. MetalLB is not a
// dependency of Herald (its go.mod needs modules the proxy refuses): the
// test reads its source as text only.
func metallbDir(t *testing.T) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", metallbModule)
	// Outside Herald's module, so that go.mod and go.sum stay as they are.
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cannot get MetalLB's source to compare the table with: `go mod download -json %s` failed: %v\nstdout: %s\nstderr: %s",
			metallbModule, err, stdout.String(), stderr.String())
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(stdout.Bytes(), &info); err != nil || info.Dir == "" {
		t.Fatalf("`go mod download -json %s` printed no module directory (error %q, %v): %s", metallbModule, info.Error, err, stdout.String())
	}
	return info.Dir
}

// goFile is one parsed source file and its imports by local name.
type goFile struct {
	imports map[string]string
}

// typeDecl is a named type of an API package and the file it is declared in.
type typeDecl struct {
	expr ast.Expr
	file *goFile
}

// apiPackage holds the named types of one of MetalLB's API packages.
type apiPackage struct {
	version string
	types   map[string]typeDecl
}

const (
	metaV1 = "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreV1 = "k8s.io/api/core/v1"
)

// parseAPIPackage parses the Go files of dir (tests excepted).
func parseAPIPackage(t *testing.T, dir, version string) *apiPackage {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in %s (%v)", dir, err)
	}
	p := &apiPackage{version: version, types: map[string]typeDecl{}}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing MetalLB's %s: %v", name, err)
		}
		gf := &goFile{imports: map[string]string{}}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if imp.Name != nil {
				local = imp.Name.Name
			}
			gf.imports[local] = path
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, s := range gd.Specs {
				ts := s.(*ast.TypeSpec)
				p.types[ts.Name.Name] = typeDecl{expr: ts.Type, file: gf}
			}
		}
	}
	return p
}

// jsonName returns a struct field's JSON name, whether it is inlined, and
// whether JSON skips it.
func jsonName(f *ast.Field) (name string, inline, skip bool) {
	tag := ""
	if f.Tag != nil {
		s, _ := strconv.Unquote(f.Tag.Value)
		tag = reflect.StructTag(s).Get("json")
	}
	if tag == "-" {
		return "", false, true
	}
	parts := strings.Split(tag, ",")
	name = parts[0]
	for _, o := range parts[1:] {
		if o == "inline" {
			inline = true
		}
	}
	if len(f.Names) == 0 && name == "" {
		inline = true
	}
	if name == "" && !inline && len(f.Names) > 0 {
		name = f.Names[0].Name
	}
	return name, inline, false
}

// wholeTypes are read as one field each: a label selector (and MetalLB
// v1beta1's copy of it), a duration.
var wholeTypes = map[string]bool{
	metaV1 + ".LabelSelector": true,
	metaV1 + ".Duration":      true,
	"v1beta1.NodeSelector":    true,
}

// basicTypes are Go's predeclared types a JSON field may have.
var basicTypes = map[string]bool{
	"string": true, "bool": true, "int": true, "int8": true, "int16": true, "int32": true, "int64": true,
	"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true, "float32": true, "float64": true,
}

// walker collects the JSON paths of the leaf fields under a type.
type walker struct {
	t   *testing.T
	pkg *apiPackage
	out map[string]bool
}

// isStruct reports whether e names a struct walked field by field.
func (w *walker) isStruct(e ast.Expr, f *goFile) bool {
	switch e := e.(type) {
	case *ast.StarExpr:
		return w.isStruct(e.X, f)
	case *ast.StructType:
		return true
	case *ast.Ident:
		d, ok := w.pkg.types[e.Name]
		if !ok || wholeTypes[w.pkg.version+"."+e.Name] {
			return false
		}
		return w.isStruct(d.expr, d.file)
	case *ast.SelectorExpr:
		return w.selectorPath(e, f) == coreV1+".SecretReference"
	}
	return false
}

func (w *walker) selectorPath(e *ast.SelectorExpr, f *goFile) string {
	x, _ := e.X.(*ast.Ident)
	if x == nil {
		w.t.Fatalf("unexpected type expression %T", e.X)
	}
	return f.imports[x.Name] + "." + e.Sel.Name
}

// walk records the leaves of type e under path.
func (w *walker) walk(path string, e ast.Expr, f *goFile) {
	switch e := e.(type) {
	case *ast.StarExpr:
		w.walk(path, e.X, f)
	case *ast.ArrayType:
		if w.isStruct(e.Elt, f) {
			w.walk(path+"[]", e.Elt, f)
		} else {
			w.out[path] = true
		}
	case *ast.MapType:
		w.out[path] = true
	case *ast.StructType:
		w.walkStruct(path, e, f)
	case *ast.Ident:
		w.walkIdent(path, e)
	case *ast.SelectorExpr:
		switch p := w.selectorPath(e, f); {
		case wholeTypes[p]:
			w.out[path] = true
		case p == coreV1+".SecretReference":
			w.out[path+".name"] = true
			w.out[path+".namespace"] = true
		default:
			w.t.Fatalf("%s: MetalLB uses the type %s, which this test does not know: teach it (wholeTypes, or its fields)", path, p)
		}
	default:
		w.t.Fatalf("%s: unexpected type expression %T", path, e)
	}
}

func (w *walker) walkIdent(path string, e *ast.Ident) {
	if basicTypes[e.Name] || wholeTypes[w.pkg.version+"."+e.Name] {
		w.out[path] = true
		return
	}
	d, ok := w.pkg.types[e.Name]
	if !ok {
		w.t.Fatalf("%s: type %s is neither predeclared nor declared in MetalLB's %s package", path, e.Name, w.pkg.version)
	}
	switch u := d.expr.(type) {
	case *ast.StructType:
		w.walk(path, d.expr, d.file)
	case *ast.Ident:
		// A named string or number (an enumeration): one field.
		if !basicTypes[u.Name] {
			w.t.Fatalf("%s: named type %s of %s is a %s", path, e.Name, w.pkg.version, u.Name)
		}
		w.out[path] = true
	default:
		w.t.Fatalf("%s: named type %s of %s is a %T: teach the test how to read it", path, e.Name, w.pkg.version, u)
	}
}

func (w *walker) walkStruct(path string, s *ast.StructType, f *goFile) {
	for _, fld := range s.Fields.List {
		name, inline, skip := jsonName(fld)
		switch {
		case skip:
		case inline:
			w.walk(path, fld.Type, f)
		default:
			w.walk(join(path, name), fld.Type, f)
		}
	}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// apiKinds returns, per "Kind version", the table fields MetalLB's API
// calls for: the spec's leaves, "status" when the status has fields, or ""
// alone for a kind without a spec (one MetalLB writes itself).
func apiKinds(t *testing.T, pkgs ...*apiPackage) map[string]map[string]bool {
	out := map[string]map[string]bool{}
	for _, p := range pkgs {
		for name, d := range p.types {
			s, ok := d.expr.(*ast.StructType)
			if !ok || !isKind(s, d.file) {
				continue
			}
			out[name+" "+p.version] = kindFields(t, p, s, d.file)
		}
	}
	return out
}

// isKind reports whether a struct is an API object: it embeds TypeMeta and
// has ObjectMeta (a List has ListMeta).
func isKind(s *ast.StructType, f *goFile) bool {
	var typeMeta, objectMeta bool
	for _, fld := range s.Fields.List {
		sel, ok := fld.Type.(*ast.SelectorExpr)
		if !ok {
			continue
		}
		x, _ := sel.X.(*ast.Ident)
		if x == nil || f.imports[x.Name] != metaV1 {
			continue
		}
		typeMeta = typeMeta || sel.Sel.Name == "TypeMeta"
		objectMeta = objectMeta || sel.Sel.Name == "ObjectMeta"
	}
	return typeMeta && objectMeta
}

func kindFields(t *testing.T, p *apiPackage, s *ast.StructType, f *goFile) map[string]bool {
	spec := &walker{t: t, pkg: p, out: map[string]bool{}}
	status := &walker{t: t, pkg: p, out: map[string]bool{}}
	for _, fld := range s.Fields.List {
		switch name, _, _ := jsonName(fld); name {
		case "spec":
			spec.walk("spec", fld.Type, f)
		case "status":
			status.walk("status", fld.Type, f)
		}
	}
	if len(spec.out) == 0 {
		return map[string]bool{"": true}
	}
	if len(status.out) > 0 {
		spec.out["status"] = true
	}
	return spec.out
}

// annotationRE matches the Service annotations among MetalLB's constants.
var annotationRE = regexp.MustCompile(`^metallb\.(io|universe\.tf)/[^/]+$`)

// apiAnnotations returns the string constants of the files that are
// MetalLB's annotation names, evaluating "prefix" + "/" + "name".
func apiAnnotations(t *testing.T, files ...string) map[string]bool {
	out := map[string]bool{}
	for _, name := range files {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatalf("parsing MetalLB's %s: %v", name, err)
		}
		consts := map[string]ast.Expr{}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						consts[n.Name] = vs.Values[i]
					}
				}
			}
		}
		for _, e := range consts {
			if v, ok := constString(e, consts, 0); ok && annotationRE.MatchString(v) {
				out[v] = true
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no metallb.io/ annotation constants found in %v: has MetalLB moved them?", files)
	}
	return out
}

// constString evaluates a string constant made of literals, other
// constants of the file and +.
func constString(e ast.Expr, consts map[string]ast.Expr, depth int) (string, bool) {
	if depth > 16 {
		return "", false
	}
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.STRING {
			return "", false
		}
		s, err := strconv.Unquote(e.Value)
		return s, err == nil
	case *ast.Ident:
		d, ok := consts[e.Name]
		if !ok {
			return "", false
		}
		return constString(d, consts, depth+1)
	case *ast.ParenExpr:
		return constString(e.X, consts, depth+1)
	case *ast.BinaryExpr:
		if e.Op != token.ADD {
			return "", false
		}
		a, ok1 := constString(e.X, consts, depth+1)
		b, ok2 := constString(e.Y, consts, depth+1)
		return a + b, ok1 && ok2
	}
	return "", false
}

// diffTable compares the table with MetalLB's API: what MetalLB has and
// the table lacks, and what the table names and MetalLB lacks.
func diffTable(table []Row, kinds map[string]map[string]bool, annotations map[string]bool) (missing, extra []string) {
	have := map[string]bool{}
	for _, r := range table {
		have[rowKey(r)] = true
	}
	want := map[string]bool{}
	for kv, fields := range kinds {
		kind, version, _ := strings.Cut(kv, " ")
		for f := range fields {
			want[rowKey(Row{Kind: kind, Version: version, Field: f})] = true
		}
	}
	for a := range annotations {
		want[rowKey(Row{Kind: KindAnnotation, Field: a})] = true
	}
	for k := range want {
		if !have[k] {
			missing = append(missing, k)
		}
	}
	for k := range have {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	return missing, extra
}

func rowKey(r Row) string {
	if r.Kind == KindAnnotation {
		return fmt.Sprintf("%s %s", r.Kind, r.Field)
	}
	f := r.Field
	if f == "" {
		f = "(the whole kind)"
	}
	return fmt.Sprintf("%s (%s) %s", r.Kind, r.Version, f)
}

// readMetalLBAPI reads MetalLB's kinds and annotations from its source.
func readMetalLBAPI(t *testing.T) (map[string]map[string]bool, map[string]bool) {
	dir := metallbDir(t)
	kinds := apiKinds(t,
		parseAPIPackage(t, filepath.Join(dir, "api", "v1beta1"), "v1beta1"),
		parseAPIPackage(t, filepath.Join(dir, "api", "v1beta2"), "v1beta2"))
	annotations := apiAnnotations(t,
		filepath.Join(dir, "controller", "service.go"),
		filepath.Join(dir, "speaker", "layer2_controller.go"))
	return kinds, annotations
}

// TestTableMatchesMetalLB fails when MetalLB's API (read from its source)
// has a field, kind or Service annotation the table lacks, or the table
// names one MetalLB does not have.
func TestTableMatchesMetalLB(t *testing.T) {
	kinds, annotations := readMetalLBAPI(t)
	missing, extra := diffTable(Table, kinds, annotations)
	for _, m := range missing {
		t.Errorf("MetalLB %s has %s, which the table lacks: add a row", metallbModule, m)
	}
	for _, e := range extra {
		t.Errorf("the table names %s, which MetalLB %s does not have", e, metallbModule)
	}
	if t.Failed() {
		return
	}
	// The comparison itself must see a row go missing and a row too many.
	short := append([]Row(nil), Table[1:]...)
	if m, _ := diffTable(short, kinds, annotations); len(m) != 1 || m[0] != rowKey(Table[0]) {
		t.Errorf("without the row %q the comparison reports missing %q", rowKey(Table[0]), m)
	}
	long := append(append([]Row(nil), Table...), Row{Kind: "BGPPeer", Version: "v1beta2", Field: "spec.bogus"})
	if _, e := diffTable(long, kinds, annotations); len(e) != 1 || e[0] != "BGPPeer (v1beta2) spec.bogus" {
		t.Errorf("with a bogus row the comparison reports extra %q", e)
	}
}

// TestTableRows checks the rows themselves: one per key, a text where the
// disposition needs one.
func TestTableRows(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range Table {
		k := rowKey(r)
		if seen[k] {
			t.Errorf("%s: two rows", k)
		}
		seen[k] = true
		if r.Disposition < Same || r.Disposition > NotConfig {
			t.Errorf("%s: disposition %v", k, r.Disposition)
		}
		if r.Disposition != Same && r.Text == "" {
			t.Errorf("%s: a %v row must say how or why", k, r.Disposition)
		}
	}
}
