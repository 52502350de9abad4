// Package buildid reads the GNU build-id of a Linux kernel: from the
// vmlinux ELF file a build links (its NT_GNU_BUILD_ID note, which kbuild
// asks the linker for with --build-id=sha1) and from the raw note section
// a running kernel exposes as /sys/kernel/notes. The two are the same
// bytes, so comparing them proves that a machine runs the kernel that was
// built: the kernel banner cannot (patcheval pins KBUILD_BUILD_VERSION,
// USER, HOST and TIMESTAMP, so two different kernels of one release print
// the same banner).
package buildid

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
)

// ntGNUBuildID is the note type of a GNU build-id (elf.h NT_GNU_BUILD_ID).
const ntGNUBuildID = 3

// ParseNotes returns the hex GNU build-id in a note section's raw bytes
// (the format of /sys/kernel/notes: namesz, descsz, type, the name and
// the descriptor, each padded to 4 bytes), or "" when it holds none.
// order is the kernel's byte order.
func ParseNotes(b []byte, order binary.ByteOrder) string {
	for len(b) >= 12 {
		namesz, descsz, typ := order.Uint32(b[0:]), order.Uint32(b[4:]), order.Uint32(b[8:])
		b = b[12:]
		nameEnd, descEnd := pad4(namesz), pad4(namesz)+pad4(descsz)
		if nameEnd > uint64(len(b)) || descEnd > uint64(len(b)) {
			return ""
		}
		name := bytes.TrimRight(b[:namesz], "\x00")
		if typ == ntGNUBuildID && string(name) == "GNU" && descsz > 0 {
			return hex.EncodeToString(b[nameEnd : nameEnd+uint64(descsz)])
		}
		b = b[descEnd:]
	}
	return ""
}

// ParseNotesAny is ParseNotes trying little then big endian (a host that
// reads a remote kernel's notes need not know its byte order: the GNU
// name only matches in the right one).
func ParseNotesAny(b []byte) string {
	if id := ParseNotes(b, binary.LittleEndian); id != "" {
		return id
	}
	return ParseNotes(b, binary.BigEndian)
}

func pad4(n uint32) uint64 { return (uint64(n) + 3) &^ 3 }

// FromELF returns the GNU build-id of an ELF file (a vmlinux), reading
// its note sections (or, without section headers, its PT_NOTE segments).
// A file that is not ELF or has no build-id is an error.
func FromELF(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("build-id of %s: %w", path, err)
	}
	defer f.Close()
	return FromReaderAt(f, path)
}

// FromReaderAt is FromELF of an open file (name names it in errors).
func FromReaderAt(r io.ReaderAt, name string) (string, error) {
	path := name
	f, err := elf.NewFile(r)
	if err != nil {
		return "", fmt.Errorf("build-id of %s: %w", path, err)
	}
	for _, s := range f.Sections {
		if s.Type != elf.SHT_NOTE {
			continue
		}
		data, err := s.Data()
		if err != nil {
			continue
		}
		if id := ParseNotes(data, f.ByteOrder); id != "" {
			return id, nil
		}
	}
	for _, p := range f.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		data := make([]byte, p.Filesz)
		if _, err := p.ReadAt(data, 0); err != nil {
			continue
		}
		if id := ParseNotes(data, f.ByteOrder); id != "" {
			return id, nil
		}
	}
	return "", fmt.Errorf("build-id of %s: no GNU build-id note (linked without --build-id?)", path)
}

// IsELF says whether the file at path starts with the ELF magic.
func IsELF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var m [4]byte
	_, err = f.Read(m[:])
	return err == nil && string(m[:]) == elf.ELFMAG
}
