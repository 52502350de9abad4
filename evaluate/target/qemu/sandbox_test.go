package qemu

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/sandbox"
)

// QEMU's command runs in the sandbox: not as root, with the image and the
// boot directory readable, nothing else of the host (a token file beside
// them), no network, and none of patcheval's environment (the SMTP
// password). A shell stands in for QEMU: what it sees is what a guest
// that broke out of QEMU would.
func TestQEMURunsSandboxed(t *testing.T) {
	t.Setenv("PATCHEVAL_SMTP_PASSWORD", "smtp-secret-in-env")
	dir := t.TempDir()
	image, boot, token := filepath.Join(dir, "vmlinux"), filepath.Join(dir, "boot"), filepath.Join(dir, "token")
	os.WriteFile(image, []byte("kernel\n"), 0o644)
	os.Mkdir(boot, 0o700)
	os.WriteFile(filepath.Join(boot, "initramfs.cpio"), []byte("initramfs\n"), 0o600)
	os.WriteFile(token, []byte("token-secret\n"), 0o600)
	tg := New(Config{})
	script := "id -u; cat " + image + " " + boot + "/initramfs.cpio; cat " + token + " 2>&1; env; grep -c : /proc/net/dev"
	cmd, err := tg.sandboxed([]string{"sh", "-c", script}, image, boot, false)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := cmd.CombinedOutput()
	s := string(out)
	t.Logf("sandboxed QEMU's view:\n%s", s)
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if lines[0] == "0" && os.Geteuid() == 0 {
		t.Errorf("QEMU runs as root")
	}
	if !strings.Contains(s, "kernel\ninitramfs\n") {
		t.Errorf("QEMU cannot read its image and initramfs")
	}
	for _, bad := range []string{"token-secret", "smtp-secret-in-env"} {
		if strings.Contains(s, bad) {
			t.Errorf("QEMU sees %q", bad)
		}
	}
	if last := lines[len(lines)-1]; last != "1" {
		t.Errorf("QEMU sees %s network devices, want 1 (lo)", last)
	}
	if sandbox.Disabled() {
		t.Log("PATCHEVAL_SANDBOX=off: expected to fail")
	}
}
