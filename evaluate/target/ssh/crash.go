package ssh

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/internal/fail"
)

// crashMarkers begin the console lines of a kernel that crashed: a panic,
// an oops, a BUG, a fault the kernel could not handle (x86, arm64,
// powerpc wordings). Seen on a machine that then stopped answering, they
// are the kernel's failure, not the lab's.
var crashMarkers = []string{
	"Kernel panic - not syncing",
	"Oops:", "Oops -",
	"BUG: ", "kernel BUG at",
	"general protection fault",
	"Internal error: ",
	"Unable to handle kernel",
}

// consoleWindow bounds what is read of the console log: the newest bytes
// since the mark.
const consoleWindow = 1 << 20

// consoleMark is where the machine's console log (Config.ConsoleLog)
// ended when a boot (or its benchmarks) began: what comes after it is
// this boot's.
type consoleMark struct {
	path string
	off  int64
}

// markConsole marks the console log's end ("" path when none is
// configured; a log that does not exist yet starts at 0).
func (t *Target) markConsole() consoleMark {
	m := consoleMark{path: t.cfg.ConsoleLog}
	if m.path != "" {
		if st, err := os.Stat(m.path); err == nil {
			m.off = st.Size()
		}
	}
	return m
}

// since is what the console log gained after the mark (its last
// consoleWindow bytes); nil without a console log.
func (m consoleMark) since() []byte {
	if m.path == "" {
		return nil
	}
	f, err := os.Open(m.path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := m.off
	if st.Size() < off {
		off = 0 // the log was rotated or truncated
	}
	if st.Size()-off > consoleWindow {
		off = st.Size() - consoleWindow
	}
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	return b
}

// crash is a crash report found in what the machine printed.
type crash struct {
	Line   string // the first crash line ("Kernel panic - not syncing: ...")
	Report string // the lines around it, to the end of the panic
	Source string // where it was read
}

// findCrash finds the first crash in text after the line holding after
// (the boot's own command line, with its nonce, when the console shows
// it; "" = anywhere): the report runs from up to 20 lines before it to
// the panic's end marker (or the next boot's banner, or 60 lines on).
func findCrash(text []byte, after string) *crash {
	lines := strings.Split(strings.ReplaceAll(string(text), "\r", ""), "\n")
	from := 0
	if after != "" {
		for i, l := range lines {
			if strings.Contains(l, after) {
				from = i + 1
			}
		}
	}
	for i := from; i < len(lines); i++ {
		if !hasCrashMarker(lines[i]) {
			continue
		}
		// The panic line names the cause: prefer it to the oops before it.
		first := lines[i]
		end := min(len(lines), i+60)
		for j := i; j < end; j++ {
			if strings.Contains(lines[j], "Kernel panic - not syncing") && !strings.Contains(first, "Kernel panic") {
				first = lines[j]
			}
			if strings.Contains(lines[j], "---[ end Kernel panic") {
				end = j + 1
				break
			}
			if j > i && strings.Contains(lines[j], "Linux version ") {
				end = j // the next boot (panic=N rebooted the machine)
				break
			}
		}
		start := max(from, i-20)
		return &crash{Line: crashLine(first), Report: strings.Join(lines[start:end], "\n")}
	}
	return nil
}

func hasCrashMarker(l string) bool {
	for _, m := range crashMarkers {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

// crashLine is a console line from its crash marker on (the timestamp
// and log level prefix left out).
func crashLine(l string) string {
	best := -1
	for _, m := range crashMarkers {
		if i := strings.Index(l, m); i >= 0 && (best < 0 || i < best) {
			best = i
		}
	}
	if best > 0 {
		l = l[best:]
	}
	return strings.TrimSpace(l)
}

// crashSince looks for a crash of the kernel under test in the console
// log after mark (after the line naming nonce when the log shows it) and
// in what the boot hook printed (hookOut: a hook may print the machine's
// console, e.g. the BMC's serial-over-LAN buffer).
func (t *Target) crashSince(mark consoleMark, nonce string, hookOut []byte) *crash {
	after := ""
	if nonce != "" {
		after = NonceParam + "=" + nonce
	}
	if log := mark.since(); len(log) > 0 {
		a := after
		if a != "" && !bytes.Contains(log, []byte(a)) {
			a = "" // a quiet console does not print the command line
		}
		if c := findCrash(log, a); c != nil {
			c.Source = "console log " + mark.path
			return c
		}
	}
	if len(hookOut) > 0 {
		if c := findCrash(hookOut, ""); c != nil {
			c.Source = "the boot hook's output"
			return c
		}
	}
	return nil
}

// awaitCrash is crashSince, read again once after settle when the first
// read shows nothing: a console server may write the machine's last
// lines a moment after its network went down.
func (t *Target) awaitCrash(mark consoleMark, nonce string, hookOut []byte, settle time.Duration) *crash {
	if c := t.crashSince(mark, nonce, hookOut); c != nil || mark.path == "" {
		return c
	}
	time.Sleep(settle)
	return t.crashSince(mark, nonce, hookOut)
}

// crashError is the boot's failure when the kernel under test crashed:
// the kernel's (exit 1, recorded as this variant's failed boot, not
// retried), with the crash report as the console tail.
func (t *Target) crashError(k evaluate.Kernel, when string, c *crash, console *bytes.Buffer) *evaluate.BootError {
	fmt.Fprintf(console, "--- %s crashed %s (%s) ---\n%s\n--- end of the crash report ---\n", imageName(k), when, c.Source, c.Report)
	return &evaluate.BootError{Variant: k.Variant, Phase: evaluate.PhaseKernelPanic, Kind: fail.KindFailed,
		Msg: fmt.Sprintf("%s crashed %s: %s (%s)", imageName(k), when, c.Line, c.Source), Tail: c.Report}
}
