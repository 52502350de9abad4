package pipelines

import (
	"fmt"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// Error is one problem in a pipeline file, at File:Line (Line 0: the file
// as a whole).
type Error struct {
	File string
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s: %s", e.File, e.Msg)
}

// FailKind: a bad pipeline file is bad input.
func (e *Error) FailKind() fail.Kind { return fail.KindInput }

// Errors is every problem found in one file, in line order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// FailKind: a bad pipeline file is bad input.
func (es Errors) FailKind() fail.Kind { return fail.KindInput }
