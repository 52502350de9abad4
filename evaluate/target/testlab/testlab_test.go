package testlab

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/testenv"
)

// TestInitramfs builds the lab's initramfs from Debian's packages and
// checks it holds what the machine runs: /init, sshd and its config and
// keys, kexec, busybox and the shared objects they load (as cpio lists it).
func TestInitramfs(t *testing.T) {
	testenv.SkipIfSlow(t, "Debian packages from the mirror")
	dir := t.TempDir()
	for _, k := range []string{"id", "host"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v\n%s", err, out)
		}
	}
	img := filepath.Join(dir, "initrd.cpio")
	if err := writeInitramfs(img, filepath.Join(dir, "id.pub"), filepath.Join(dir, "host"), nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	out := newcNames(t, data)
	list := "\n" + strings.Join(out, "\n") + "\n"
	for _, want := range []string{"init", "etc/ssh/sshd_config", "etc/ssh/ssh_host_ed25519_key", "root/.ssh/authorized_keys", "usr/sbin/sshd", "sbin/kexec",
		"bin/busybox", "lib64/ld-linux-x86-64.so.2", "libcrypto.so.3"} {
		if !strings.Contains(list, want) {
			t.Errorf("the initramfs lacks %s:%s", want, list)
		}
	}
	fi, _ := os.Stat(img)
	t.Logf("lab initramfs: %d KiB, %d entries", fi.Size()>>10, strings.Count(list, "\n"))
}

// newcNames lists the entries of concatenated newc archives (as the
// kernel unpacks them: cpio -t stops at the first trailer).
func newcNames(t *testing.T, b []byte) []string {
	var names []string
	hex := func(s []byte) int {
		n, err := strconv.ParseUint(string(s), 16, 32)
		if err != nil {
			t.Fatalf("newc header field %q: %v", s, err)
		}
		return int(n)
	}
	for off := 0; off+110 <= len(b); {
		if b[off] == 0 {
			off += 4 // padding between archives
			continue
		}
		h := b[off : off+110]
		if string(h[:6]) != "070701" {
			t.Fatalf("offset %d: not a newc header", off)
		}
		size, nsize := hex(h[54:62]), hex(h[94:102])
		name := strings.TrimRight(string(b[off+110:off+110+nsize]), "\x00")
		off = (off + 110 + nsize + 3) &^ 3
		off = (off + size + 3) &^ 3
		if name != "TRAILER!!!" {
			names = append(names, name)
		}
	}
	return names
}
