package selinux

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
)

// selinuxMagic starts every binary policy (SELINUX_MAGIC, little endian).
const selinuxMagic = 0xf97cff8c

// TestCompileMinimal compiles the shipped policy with the real
// checkpolicy (.ci/install-deps installs it): a binary policy of version
// PolicyVersion that the second call takes from the cache.
func TestCompileMinimal(t *testing.T) {
	if got := Shipped(); len(got) != 1 || got[0] != "minimal" {
		t.Fatalf("Shipped() = %v, want [minimal]", got)
	}
	src, err := Source("minimal")
	if err != nil {
		t.Fatal(err)
	}
	// The kill() path's permissions are declared, not left to
	// handle_unknown.
	for _, want := range []string{"class process\n{", "signull", "allow base_t base_t:process *;", "sid devnull user_u:base_r:base_t"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("minimal.conf lacks %q", want)
		}
	}
	cache := t.TempDir()
	bin, err := Compile(context.Background(), "minimal", src, cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(bin) < 1024 || binary.LittleEndian.Uint32(bin) != selinuxMagic {
		t.Fatalf("policy: %d bytes, magic %#x", len(bin), binary.LittleEndian.Uint32(bin))
	}
	// magic, length of "SE Linux", "SE Linux", version
	if n := binary.LittleEndian.Uint32(bin[4:]); n != 8 || string(bin[8:16]) != "SE Linux" || binary.LittleEndian.Uint32(bin[16:]) != PolicyVersion {
		t.Errorf("policy header % x, want \"SE Linux\" version %d", bin[:20], PolicyVersion)
	}
	files, _ := filepath.Glob(filepath.Join(cache, "selinux", "policy-*"))
	if len(files) != 1 {
		t.Fatalf("cache holds %v, want one policy", files)
	}
	os.WriteFile(files[0], []byte("cached"), 0o644)
	if again, err := Compile(context.Background(), "minimal", src, cache); err != nil || string(again) != "cached" {
		t.Errorf("second Compile did not use the cache: %q %v", again, err)
	}
	if again, err := Compile(context.Background(), "minimal", src, ""); err != nil || !bytes.Equal(again, bin) {
		t.Errorf("Compile is not reproducible: %d vs %d bytes, %v", len(again), len(bin), err)
	}
}

// TestCompileError: a broken source is the user's input error, with
// checkpolicy's message naming the policy and the line.
func TestCompileError(t *testing.T) {
	src, _ := Source("minimal")
	bad := strings.Replace(string(src), "allow base_t base_t:process *;", "allow base_t nosuch_t:process *;", 1)
	_, err := Compile(context.Background(), "my.conf", []byte(bad), t.TempDir())
	if err == nil || fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "my.conf") || !strings.Contains(err.Error(), "nosuch_t") {
		t.Fatalf("Compile(broken) = %v (kind %v), want an input error naming my.conf and nosuch_t", err, fail.KindOf(err))
	}
	if _, err := Source("nosuch"); err == nil || !strings.Contains(err.Error(), "minimal") {
		t.Errorf("Source(nosuch) = %v", err)
	}
}
