// Package selinux compiles the SELinux policies the guest agent loads
// (guest.Plan.SELinux): policy sources in checkpolicy's language, the
// shipped ones embedded (Shipped, Source: "minimal", a one-type
// allow-everything policy in the shape of the kernel's
// scripts/selinux/mdp) or a user's file, compiled on the host with
// Debian's checkpolicy (Compile) and cached by content.
package selinux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

//go:embed policy/*.conf
var shipped embed.FS

// PolicyVersion is the binary policy version Compile writes: 33
// (POLICYDB_VERSION_COMP_FTRANS), the newest 6.1 reads; newer kernels
// read it too.
const PolicyVersion = 33

// Shipped names the shipped policy sources, sorted ("minimal").
func Shipped() []string {
	ents, _ := fs.ReadDir(shipped, "policy")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".conf"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Source returns the shipped policy source called name.
func Source(name string) ([]byte, error) {
	b, err := shipped.ReadFile("policy/" + strings.TrimSuffix(name, ".conf") + ".conf")
	if err != nil {
		return nil, fail.Inputf("no shipped SELinux policy %q (have %s)", name, strings.Join(Shipped(), ", "))
	}
	return b, nil
}

// Compile compiles policy source src (named name in messages) with
// `checkpolicy -c 33 -U allow` into a binary policy. Classes and
// permissions the source does not declare are allowed (-U allow,
// handle_unknown). Results are cached in cacheDir/selinux by the hash of
// the source and checkpolicy's version ("" cacheDir: no cache).
func Compile(ctx context.Context, name string, src []byte, cacheDir string) ([]byte, error) {
	tool, err := exec.LookPath("checkpolicy")
	if err != nil {
		return nil, fail.Infraf("compiling SELinux policy %s: checkpolicy not found (install Debian's checkpolicy package)", name)
	}
	ver, err := exec.CommandContext(ctx, tool, "-V").Output()
	if err != nil {
		return nil, fail.Infraf("%s -V: %w", tool, err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "checkpolicy %s\n-c %d -U allow\n", bytes.TrimSpace(ver), PolicyVersion)
	h.Write(src)
	sum := hex.EncodeToString(h.Sum(nil))[:24]
	var cached string
	if cacheDir != "" {
		cached = filepath.Join(cacheDir, "selinux", "policy-"+sum+"."+fmt.Sprint(PolicyVersion))
		if b, err := os.ReadFile(cached); err == nil && len(b) > 0 {
			return b, nil
		}
	}
	dir, err := os.MkdirTemp("", "patcheval-selinux-")
	if err != nil {
		return nil, fail.Infra(err)
	}
	defer os.RemoveAll(dir)
	in, out := filepath.Join(dir, "policy.conf"), filepath.Join(dir, "policy.bin")
	if err := os.WriteFile(in, src, 0o644); err != nil {
		return nil, fail.Infra(err)
	}
	cmd := exec.CommandContext(ctx, tool, "-c", fmt.Sprint(PolicyVersion), "-U", "allow", "-o", out, in)
	cmd.Dir = dir
	msg, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			// checkpolicy names the line: "policy.conf:12:ERROR ..."
			text := strings.ReplaceAll(strings.TrimSpace(string(msg)), in, name)
			return nil, fail.Inputf("SELinux policy %s does not compile (checkpolicy -c %d -U allow):\n%s", name, PolicyVersion, text)
		}
		return nil, fail.Infraf("running checkpolicy on %s: %w", name, err)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) == 0 {
		return nil, fail.Infraf("checkpolicy wrote no policy for %s: %v\n%s", name, err, msg)
	}
	if cached != "" {
		if err := os.MkdirAll(filepath.Dir(cached), 0o755); err == nil {
			tmp := fmt.Sprintf("%s.tmp%d", cached, os.Getpid())
			if os.WriteFile(tmp, b, 0o644) == nil {
				os.Rename(tmp, cached)
			}
		}
	}
	return b, nil
}
