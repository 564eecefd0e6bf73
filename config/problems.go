package config

import (
	"fmt"
	"sort"
	"strings"
)

// Severity says whether a Problem makes Herald ignore the object.
type Severity int

const (
	// Error: the object is ignored until it is fixed.
	Error Severity = iota
	// Warning: the object is used, but something in it probably is not what
	// the operator meant (a reference to a pool that does not exist).
	Warning
)

func (s Severity) String() string {
	if s == Warning {
		return "warning"
	}
	return "error"
}

// Problem is one finding about one object.
type Problem struct {
	Severity Severity
	// Kind and Name identify the object (Name without namespace: every
	// configuration object lives in the install namespace).
	Kind string
	Name string
	// Field is the JSON path of the offending field (spec.addresses[1]).
	Field   string
	Message string
}

func (p Problem) Error() string {
	if p.Field == "" {
		return fmt.Sprintf("%s %s: %s", p.Kind, p.Name, p.Message)
	}
	return fmt.Sprintf("%s %s: %s: %s", p.Kind, p.Name, p.Field, p.Message)
}

// Problems is everything Parse found, errors and warnings, sorted by kind,
// name and field. A nil or empty Problems means a clean configuration.
type Problems []Problem

// Err returns the problems as an error when at least one is an Error, nil
// otherwise (warnings alone are not an error).
func (ps Problems) Err() error {
	if len(ps.Errors()) == 0 {
		return nil
	}
	return ps
}

// Error renders every problem, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Severity.String() + ": " + p.Error()
	}
	return strings.Join(lines, "\n")
}

// Summary renders the problems as one line, "field: message" joined by
// "; " (without kind and name): the text of a configuration object's Valid
// condition, and of the admission webhook's refusal of that object.
func (ps Problems) Summary() string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		if p.Field != "" {
			parts[i] = p.Field + ": " + p.Message
		} else {
			parts[i] = p.Message
		}
	}
	return strings.Join(parts, "; ")
}

// Errors returns only the problems of severity Error.
func (ps Problems) Errors() Problems {
	return ps.filter(func(p Problem) bool { return p.Severity == Error })
}

// Warnings returns only the problems of severity Warning.
func (ps Problems) Warnings() Problems {
	return ps.filter(func(p Problem) bool { return p.Severity == Warning })
}

// For returns the problems about one object.
func (ps Problems) For(kind, name string) Problems {
	return ps.filter(func(p Problem) bool { return p.Kind == kind && p.Name == name })
}

func (ps Problems) filter(keep func(Problem) bool) Problems {
	var out Problems
	for _, p := range ps {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out
}

func (ps Problems) sort() {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Field < b.Field
	})
}

// reporter collects problems about one object.
type reporter struct {
	kind, name string
	out        *Problems
	broken     bool
}

func (r *reporter) errorf(field, format string, args ...any) {
	r.broken = true
	*r.out = append(*r.out, Problem{Severity: Error, Kind: r.kind, Name: r.name, Field: field, Message: fmt.Sprintf(format, args...)})
}

func (r *reporter) warnf(field, format string, args ...any) {
	*r.out = append(*r.out, Problem{Severity: Warning, Kind: r.kind, Name: r.name, Field: field, Message: fmt.Sprintf(format, args...)})
}
