package buildid

import (
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate/guest"
)

// note is one ELF note in the raw format of /sys/kernel/notes.
func note(order binary.AppendByteOrder, name string, typ uint32, desc []byte) []byte {
	n := append([]byte(name), 0)
	var b []byte
	b = order.AppendUint32(b, uint32(len(n)))
	b = order.AppendUint32(b, uint32(len(desc)))
	b = order.AppendUint32(b, typ)
	b = append(b, n...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	b = append(b, desc...)
	for len(b)%4 != 0 {
		b = append(b, 0)
	}
	return b
}

// TestParseNotes reads the build-id among other notes (Xen's, Linux's
// own) in both byte orders, and none from damaged or foreign notes.
func TestParseNotes(t *testing.T) {
	id := []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, order := range []interface {
		binary.ByteOrder
		binary.AppendByteOrder
	}{binary.LittleEndian, binary.BigEndian} {
		raw := append(note(order, "Xen", 6, []byte("linux")), note(order, "Linux", 0x100, []byte{1, 2, 3})...)
		raw = append(raw, note(order, "GNU", ntGNUBuildID, id)...)
		if got := ParseNotesAny(raw); got != "deadbeef0102030405060708090a0b0c0d0e0f10" {
			t.Errorf("%v: %q", order, got)
		}
		if got := ParseNotes(raw[:len(raw)-3], order); got != "" {
			t.Errorf("%v: truncated note gave %q", order, got)
		}
		if got := ParseNotes(note(order, "GNU", 1, id), order); got != "" {
			t.Errorf("%v: an ABI-tag note is no build-id: %q", order, got)
		}
	}
}

// TestFromELF links a program with a known build-id and reads it back,
// and refuses a file that is not ELF.
func TestFromELF(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "a.c")
	os.WriteFile(src, []byte("int main(void) { return 0; }\n"), 0o644)
	bin := filepath.Join(dir, "a")
	want := "0123456789abcdef0123456789abcdef01234567"
	if out, err := exec.Command("gcc", "-o", bin, src, "-Wl,--build-id=0x"+want).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	got, err := FromELF(bin)
	if err != nil || got != want {
		t.Fatalf("FromELF = %q, %v; want %s", got, err, want)
	}
	if !IsELF(bin) || IsELF(src) {
		t.Error("IsELF")
	}
	if _, err := FromELF(src); err == nil || !strings.Contains(err.Error(), "a.c") {
		t.Errorf("not ELF: %v", err)
	}
}

// TestAgentParserAgrees holds the agent's own copy of the note parser
// (evaluate/guest, no imports) to this package's.
func TestAgentParserAgrees(t *testing.T) {
	raw := append(note(binary.LittleEndian, "Xen", 6, []byte("linux")),
		note(binary.LittleEndian, "GNU", ntGNUBuildID, []byte("0123456789abcdefghij"))...)
	if a, b := guest.ParseBuildID(raw), ParseNotes(raw, binary.LittleEndian); a != b || a == "" {
		t.Errorf("agent %q, host %q", a, b)
	}
	if got := guest.ParseBuildID(raw[:20]); got != "" {
		t.Errorf("truncated: %q", got)
	}
}
