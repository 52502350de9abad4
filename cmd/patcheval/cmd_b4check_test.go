package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// TestB4CheckCLI: b4 gets a JSON array on stdout and exit 0 whatever
// goes wrong (here: no server configured, a bad --mode), so that it
// shows the summary instead of an execution error.
func TestB4CheckCLI(t *testing.T) {
	t.Setenv("PATCHEVAL_SERVER", "")
	t.Setenv("PATCHEVAL_TOKEN_FILE", "")
	t.Setenv("B4_TRACKING_FILE", "")
	msg := "Message-ID: <c@x>\nSubject: [PATCH 0/2] x: y\n\ncover\n"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"b4-check"}, "no patcheval server configured"},
		{[]string{"b4-check", "--mode", "both"}, `--mode \"both\": want auto, series or patch`},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), &Env{Stdin: strings.NewReader(msg), Stdout: &out, Stderr: &errb}, tc.args)
		if code != 0 {
			t.Errorf("%v: exit %d (%s)", tc.args, code, errb.String())
		}
		var res []map[string]string
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", tc.args, err, out.String())
		}
		if len(res) != 1 || res[0]["status"] != "warn" || !strings.Contains(out.String(), tc.want) {
			t.Errorf("%v: %s", tc.args, out.String())
		}
	}
}
