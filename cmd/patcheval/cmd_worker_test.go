package main

import (
	"strings"
	"testing"
)

// TestWorkerRefuses: worker's bad flags exit 2 before it looks at the
// machine or the database.
func TestWorkerRefuses(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--compiler-cache", "sccache", "--database", "postgres://u@127.0.0.1:1/x"}, "want kcc, ccache or none"},
		{[]string{"worker", "--workers", "0"}, "at least 1"},
		{[]string{"worker", "extra"}, "unexpected arguments"},
	} {
		_, errOut, code := runsCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", c.args, code, errOut, c.want)
		}
	}
}
