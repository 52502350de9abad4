// Package secretfile reads the token and password files patcheval is
// given (serve's and a worker's --token-file, Patchwork and GitHub
// token_file, [smtp] password_file). A secret file that its group or
// other users can read is refused with one line saying how to fix it
// (chmod 600), unless PATCHEVAL_SECRET_FILES=warn, when it is read and a
// warning is written instead (for files whose mode the operator cannot
// change, e.g. on a mounted volume).
package secretfile

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// Env names the setting: "warn" reads open files with a warning; unset
// or "refuse" refuses them.
const Env = "PATCHEVAL_SECRET_FILES"

// Warnings receives the warnings of PATCHEVAL_SECRET_FILES=warn.
var Warnings io.Writer = os.Stderr

// Read returns the first line of the secret file at path, trimmed. what
// names it in errors ("--token-file", "[smtp] password_file"); the
// secret itself never appears in one.
func Read(what, path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fail.Inputf("%s %s: %v", what, path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fail.Inputf("%s %s: %v", what, path, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		switch v := os.Getenv(Env); v {
		case "warn":
			fmt.Fprintf(Warnings, "patcheval: warning: %s %s is readable by its group or others (mode %04o); chmod 600 it\n", what, path, perm)
		case "", "refuse":
			return "", fail.Inputf("%s %s is readable by its group or others (mode %04o): chmod 600 %s (or set %s=warn)", what, path, perm, path, Env)
		default:
			return "", fail.Inputf("%s=%q: want refuse or warn", Env, v)
		}
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fail.Inputf("%s %s: %v", what, path, err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSpace(line), nil
}
