// Package progress shows the progress of long work: a live, rewritten status
// line on a terminal, plain timestamped lines otherwise (logs, CI).
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/patcheval/patcheval/internal/termsafe"
)

// Reporter receives progress. It is safe for concurrent use.
type Reporter struct {
	mu    sync.Mutex
	w     io.Writer
	live  bool
	start time.Time
	last  string // the live line currently shown
	quiet bool
}

// New returns a Reporter writing to w. Live display is used when w is a
// terminal (a character device) and TERM is not "dumb".
func New(w io.Writer) *Reporter {
	r := &Reporter{w: w, start: time.Now()}
	if f, ok := w.(*os.File); ok && os.Getenv("TERM") != "dumb" {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			r.live = true
		}
	}
	return r
}

// Discard is a Reporter that shows nothing.
func Discard() *Reporter { return &Reporter{w: io.Discard, quiet: true} }

// Live reports whether the reporter rewrites a status line.
func (r *Reporter) Live() bool { return r != nil && r.live }

// Status shows a transient status ("building ppc64le/voluntary 37%"). On a
// terminal it replaces the previous status; otherwise it is printed as a
// line only when it differs from the previous one.
func (r *Reporter) Status(format string, a ...any) {
	if r == nil || r.quiet {
		return
	}
	msg := termsafe.Line(fmt.Sprintf(format, a...))
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg == r.last {
		return
	}
	r.last = msg
	if r.live {
		fmt.Fprintf(r.w, "\r\033[K%s %s", r.stamp(), msg)
		return
	}
	fmt.Fprintf(r.w, "%s %s\n", r.stamp(), msg)
}

// Printf prints a permanent line (a finished step), above the live status.
func (r *Reporter) Printf(format string, a ...any) {
	if r == nil || r.quiet {
		return
	}
	// Messages name URLs, subjects and build output from outside:
	// their control characters are escaped (they would drive the
	// terminal, or a CR would overwrite the line).
	msg := termsafe.Text(strings.TrimRight(fmt.Sprintf(format, a...), "\n"))
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live {
		fmt.Fprintf(r.w, "\r\033[K%s %s\n", r.stamp(), msg)
		if r.last != "" {
			fmt.Fprintf(r.w, "%s %s", r.stamp(), r.last)
		}
		return
	}
	fmt.Fprintf(r.w, "%s %s\n", r.stamp(), msg)
}

// Done clears the live status line.
func (r *Reporter) Done() {
	if r == nil || r.quiet {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.live && r.last != "" {
		fmt.Fprint(r.w, "\r\033[K")
	}
	r.last = ""
}

func (r *Reporter) stamp() string {
	d := time.Since(r.start).Round(time.Second)
	return fmt.Sprintf("[%02d:%02d]", int(d.Minutes()), int(d.Seconds())%60)
}

// Every calls f every interval until the returned stop is called (stop
// waits for a call under way to return, so f never runs after it): the
// "still working: N of M" line of long work that has no steps of its own
// to report, such as a download or an import.
func Every(interval time.Duration, f func()) (stop func()) {
	done, finished := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				f()
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); <-finished }) }
}
