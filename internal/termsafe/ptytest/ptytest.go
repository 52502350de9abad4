// Package ptytest opens pseudo-terminals for tests of what a command
// prints on a terminal (termsafe escapes differently there).
package ptytest

import (
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// Open opens a pseudo-terminal pair: term is what a command writes to,
// ctl reads what it wrote. Both close when the test ends; a machine
// without /dev/ptmx skips the test.
func Open(t testing.TB) (term, ctl *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(ctl.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ctl.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Raw output: the terminal passes bytes through (no \n -> \r\n).
	if tio, err := unix.IoctlGetTermios(int(term.Fd()), unix.TCGETS); err == nil {
		tio.Oflag &^= unix.OPOST
		unix.IoctlSetTermios(int(term.Fd()), unix.TCSETS, tio)
	}
	t.Cleanup(func() { term.Close(); ctl.Close() })
	return term, ctl
}
