package termsafe

import (
	"io"

	"golang.org/x/sys/unix"
)

// Terminal reports whether w is a terminal (a file descriptor with
// termios): where raw control characters take effect.
func Terminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
