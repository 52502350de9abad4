package report

import (
	"fmt"
	"strings"
)

// FileCoverage is one file the series changes and whether the measured
// kernels compiled it (build/coverage).
type FileCoverage struct {
	Path string `json:"path"`
	// Status: compiled, included, not-built, deleted, no-code.
	Status string `json:"status"`
	// Kernels are the measured variants that compiled (or included) it.
	Kernels []string `json:"kernels,omitempty"`
	// Symbols would build a not-built C file; Why are the Makefile lines.
	Symbols []string `json:"symbols,omitempty"`
	Why     []string `json:"why,omitempty"`
	Note    string   `json:"note,omitempty"`
}

// CoverageLines renders the coverage section, one line per file.
func (r *Report) CoverageLines() []string {
	var out []string
	for _, c := range r.Coverage {
		var s string
		switch c.Status {
		case "compiled":
			s = "compiled into " + strings.Join(c.Kernels, ", ")
		case "included":
			s = "included by objects of " + strings.Join(c.Kernels, ", ")
		case "not-built":
			s = "NOT BUILT in any measured kernel"
			if len(c.Symbols) > 0 {
				s += "; " + strings.Join(c.Symbols, " and ") + " would build it"
				if len(c.Why) > 0 {
					s += " (" + c.Why[0] + ")"
				}
			}
			if c.Note != "" {
				s += "; " + c.Note
			}
		case "deleted":
			s = "deleted by the series"
		default:
			s = c.Status
			if c.Note != "" {
				s = c.Note
			}
		}
		out = append(out, c.Path+": "+s)
	}
	return out
}

// CoverageWarning is non-empty when code the series changes was not
// compiled into the measured kernels: a result of no significant change
// says nothing about such code, and the report and draft say so first.
func (r *Report) CoverageWarning() string {
	var code, missing []string
	for _, c := range r.Coverage {
		switch c.Status {
		case "compiled", "included":
			code = append(code, c.Path)
		case "not-built":
			code = append(code, c.Path)
			m := c.Path
			if len(c.Symbols) > 0 {
				m += " (needs " + strings.Join(c.Symbols, ", ") + ")"
			}
			missing = append(missing, m)
		}
	}
	switch {
	case len(missing) == 0:
		return ""
	case len(missing) == len(code):
		return fmt.Sprintf("WARNING: none of the code this series changes was compiled into the measured kernels (%s). "+
			"These numbers cannot show the series' effect: \"no significant change\" here means nothing about it. "+
			"Rerun with --cover to build the missing symbols.", strings.Join(missing, "; "))
	default:
		return fmt.Sprintf("WARNING: %d of %d changed code files were not compiled into the measured kernels (%s); "+
			"the numbers say nothing about them (--cover builds the missing symbols).", len(missing), len(code), strings.Join(missing, "; "))
	}
}
