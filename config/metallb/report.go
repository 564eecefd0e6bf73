package metallb

import (
	"fmt"
	"sort"
	"strings"

	"github.com/herald-lb/herald/config"
)

// Class says what a Finding is, and whether it means that something did not
// carry over.
type Class int

const (
	// Unknown: a field that is not in MetalLB's API (or not of Herald's
	// type for it). Not carried.
	Unknown Class = iota + 1
	// NotCarried: something MetalLB had that the Herald objects do not
	// (a password Secret that was not given, a value that cannot be read).
	NotCarried
	// RefusedField: a field set that Herald refuses (the Table's Refused):
	// the object is written with it, and Herald will refuse the object.
	RefusedField
	// HeraldError: config.Parse refuses a converted object.
	HeraldError
	// Note: carried, with a difference worth knowing (the Table's
	// Different), or an input object that is not configuration.
	Note
	// HeraldWarning: config.Parse warns about a converted object.
	HeraldWarning
)

func (c Class) String() string {
	switch c {
	case Unknown:
		return "unknown field"
	case NotCarried:
		return "not carried"
	case RefusedField:
		return "refused"
	case HeraldError:
		return "herald error"
	case Note:
		return "note"
	case HeraldWarning:
		return "herald warning"
	}
	return fmt.Sprintf("Class(%d)", int(c))
}

// Blocking reports whether the class means something did not carry over as
// MetalLB had it.
func (c Class) Blocking() bool {
	return c == Unknown || c == NotCarried || c == RefusedField || c == HeraldError
}

// Finding is one thing the report says about one object.
type Finding struct {
	Class Class
	// Object names the object: "BGPPeer metallb-system/peer1" for a
	// MetalLB object, "BGPPeer herald-system/peer1" for the Herald object
	// config.Parse judged.
	Object string
	// Field is the JSON path of the field (spec.vrf, spec.communities[1]),
	// or "" for the object as a whole.
	Field   string
	Message string
}

func (f Finding) String() string { return f.Render(nil) }

// Render is the finding's line of the report with its object, field and
// message (text from the input: names, unknown field names, values) passed
// through escape, when not nil: the report goes to an operator's terminal,
// and herald migrate escapes control characters there (internal/termsafe).
func (f Finding) Render(escape func(string) string) string {
	if escape == nil {
		escape = func(s string) string { return s }
	}
	object, msg := escape(f.Object), escape(f.Message)
	if f.Field == "" {
		return fmt.Sprintf("%s: %s: %s", f.Class, object, msg)
	}
	return fmt.Sprintf("%s: %s: %s: %s", f.Class, object, escape(f.Field), msg)
}

// Report is everything Convert found, sorted by object and field.
type Report struct {
	Findings []Finding
}

// Carried reports whether everything carried over: no finding is Blocking.
func (r Report) Carried() bool {
	for _, f := range r.Findings {
		if f.Class.Blocking() {
			return false
		}
	}
	return true
}

// Of returns the findings about one object.
func (r Report) Of(object string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Object == object {
			out = append(out, f)
		}
	}
	return out
}

// String renders the report, one finding per line, and a last line that
// sums it up.
func (r Report) String() string { return r.Render(nil) }

// Render is String with each finding's texts passed through escape (see
// Finding.Render).
func (r Report) Render(escape func(string) string) string {
	var b strings.Builder
	blocking := 0
	for _, f := range r.Findings {
		b.WriteString(f.Render(escape))
		b.WriteByte('\n')
		if f.Class.Blocking() {
			blocking++
		}
	}
	switch blocking {
	case 0:
		b.WriteString("everything carried over\n")
	case 1:
		b.WriteString("1 finding says that something did not carry over as MetalLB had it\n")
	default:
		fmt.Fprintf(&b, "%d findings say that something did not carry over as MetalLB had it\n", blocking)
	}
	return b.String()
}

func (r *Report) add(class Class, object, field, format string, args ...any) {
	r.Findings = append(r.Findings, Finding{Class: class, Object: object, Field: field, Message: fmt.Sprintf(format, args...)})
}

// addProblems adds config.Parse's problems about the Herald objects in
// namespace.
func (r *Report) addProblems(probs config.Problems, namespace string) {
	for _, p := range probs {
		class := HeraldError
		if p.Severity == config.Warning {
			class = HeraldWarning
		}
		r.add(class, objectName(p.Kind, namespace, p.Name), p.Field, "%s", p.Message)
	}
}

func (r *Report) sort() {
	sort.SliceStable(r.Findings, func(i, j int) bool {
		a, b := r.Findings[i], r.Findings[j]
		if a.Object != b.Object {
			return a.Object < b.Object
		}
		return a.Field < b.Field
	})
}

// objectName is how findings name an object: "Kind namespace/name".
func objectName(kind, namespace, name string) string {
	if namespace == "" {
		return kind + " " + name
	}
	return kind + " " + namespace + "/" + name
}
