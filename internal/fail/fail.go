// Package fail classifies errors so that the CLI can map them to exit codes:
// 0 ok, 1 evaluated-and-failed, 2 bad input, 3 infrastructure.
//
// Stages wrap their errors with Input, Infra or Failed; the CLI calls Code.
package fail

import (
	"errors"
	"fmt"
)

// Kind says whose fault an error is.
type Kind int

const (
	// KindInfra is the default for unclassified errors: the machine, the
	// network, a missing tool.
	KindInfra Kind = iota
	// KindInput is bad input from the user: a malformed mbox, an unknown
	// msgid, a bad flag or pipeline file.
	KindInput
	// KindFailed means the evaluation ran and the thing evaluated failed: a
	// patch does not apply, the kernel does not compile or boot, a
	// regression was found.
	KindFailed
)

func (k Kind) String() string {
	switch k {
	case KindInput:
		return "bad input"
	case KindFailed:
		return "failed"
	default:
		return "infrastructure"
	}
}

// ExitCode is the process exit code for the kind.
func (k Kind) ExitCode() int {
	switch k {
	case KindInput:
		return 2
	case KindFailed:
		return 1
	default:
		return 3
	}
}

// Error carries a Kind around an underlying error.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Input marks err as bad input. A nil err gives nil.
func Input(err error) error { return wrap(KindInput, err) }

// Infra marks err as an infrastructure failure.
func Infra(err error) error { return wrap(KindInfra, err) }

// Failed marks err as an evaluated failure of the thing under test.
func Failed(err error) error { return wrap(KindFailed, err) }

// Inputf is fmt.Errorf marked as bad input.
func Inputf(format string, a ...any) error { return Input(fmt.Errorf(format, a...)) }

// Infraf is fmt.Errorf marked as an infrastructure failure.
func Infraf(format string, a ...any) error { return Infra(fmt.Errorf(format, a...)) }

// Failedf is fmt.Errorf marked as an evaluated failure.
func Failedf(format string, a ...any) error { return Failed(fmt.Errorf(format, a...)) }

func wrap(k Kind, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Kind: k, Err: err}
}

// KindOf returns the kind of the outermost classified error in err's chain,
// or KindInfra when none is classified. Errors that implement
// interface{ FailKind() Kind } classify themselves. An error joining
// several (errors.Join, Unwrap() []error) has the kind of its first
// classified member: `run --keep-going`'s failed kernels stay failed.
func KindOf(err error) Kind {
	if k, ok := kindOf(err); ok {
		return k
	}
	return KindInfra
}

func kindOf(err error) (Kind, bool) {
	for e := err; e != nil; e = errors.Unwrap(e) {
		switch v := e.(type) {
		case *Error:
			return v.Kind, true
		case interface{ FailKind() Kind }:
			return v.FailKind(), true
		case interface{ Unwrap() []error }:
			for _, m := range v.Unwrap() {
				if k, ok := kindOf(m); ok {
					return k, true
				}
			}
			return KindInfra, false
		}
	}
	return KindInfra, false
}

// Code is the exit code for err: 0 for nil.
func Code(err error) int {
	if err == nil {
		return 0
	}
	return KindOf(err).ExitCode()
}
