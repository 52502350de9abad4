package guest

import (
	"encoding/binary"
	"encoding/hex"
)

// NotesPath is where a running kernel exposes its ELF notes, the GNU
// build-id of its vmlinux among them.
const NotesPath = "/sys/kernel/notes"

// ParseBuildID returns the hex GNU build-id (note type 3, name "GNU") in
// the raw notes of NotesPath, read on the machine itself (native byte
// order), or "" when there is none. internal/buildid reads the same from
// a vmlinux on the host; this copy keeps the agent free of imports.
func ParseBuildID(b []byte) string {
	o := binary.NativeEndian
	for len(b) >= 12 {
		namesz, descsz, typ := int(o.Uint32(b[0:])), int(o.Uint32(b[4:])), int(o.Uint32(b[8:]))
		b = b[12:]
		nameEnd := (namesz + 3) &^ 3
		descEnd := nameEnd + (descsz+3)&^3
		if namesz < 0 || descsz < 0 || nameEnd > len(b) || descEnd > len(b) {
			return ""
		}
		if typ == 3 && namesz == 4 && string(b[:4]) == "GNU\x00" && descsz > 0 {
			return hex.EncodeToString(b[nameEnd : nameEnd+descsz])
		}
		b = b[descEnd:]
	}
	return ""
}
