// Package initramfs writes the initramfs that the QEMU target boots: a
// newc ("070701") cpio archive, optionally gzipped, holding the guest
// agent as /init, a /dev/console node, the /proc, /sys and /dev mount
// points and the agent's plan.
package initramfs

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"
)

// Mode bits of cpio entries.
const (
	ModeDir  = 0o040000
	ModeReg  = 0o100000
	ModeChr  = 0o020000
	ModeLink = 0o120000
)

// Writer writes a newc cpio archive.
type Writer struct {
	w     *bufio.Writer
	off   int64
	ino   uint32
	mtime uint32
	dirs  map[string]bool
	err   error
}

// NewWriter starts an archive on w. Every entry gets mtime 0 so that
// equal inputs give byte-identical archives.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriter(w), ino: 1, dirs: map[string]bool{".": true, "/": true}}
}

// Entry is one archive member.
type Entry struct {
	Name         string // without leading slash: "init", "dev/console"
	Mode         uint32 // type and permission bits: ModeReg|0755
	UID, GID     uint32
	RMajor, RMin uint32 // device numbers of a character/block node
	Data         []byte // file contents or symlink target
}

func (cw *Writer) write(b []byte) {
	if cw.err != nil {
		return
	}
	n, err := cw.w.Write(b)
	cw.off += int64(n)
	cw.err = err
}

func (cw *Writer) pad() {
	if r := cw.off % 4; r != 0 {
		cw.write(make([]byte, 4-r))
	}
}

// Add writes one entry, creating missing parent directories first.
func (cw *Writer) Add(e Entry) error {
	name := strings.TrimPrefix(path.Clean("/"+e.Name), "/")
	if name == "" {
		return fmt.Errorf("initramfs: empty entry name %q", e.Name)
	}
	if dir := path.Dir(name); !cw.dirs[dir] {
		if err := cw.Add(Entry{Name: dir, Mode: ModeDir | 0o755}); err != nil {
			return err
		}
	}
	if e.Mode&0o170000 == ModeDir {
		if cw.dirs[name] {
			return nil
		}
		cw.dirs[name] = true
	}
	cw.header(name, e)
	cw.write(e.Data)
	cw.pad()
	return cw.err
}

func (cw *Writer) header(name string, e Entry) {
	nlink := 1
	if e.Mode&0o170000 == ModeDir {
		nlink = 2
	}
	ino := cw.ino
	cw.ino++
	if name == "TRAILER!!!" {
		ino = 0
		nlink = 1
	}
	hdr := fmt.Sprintf("070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		ino, e.Mode, e.UID, e.GID, nlink, cw.mtime, len(e.Data), 0, 0, e.RMajor, e.RMin, len(name)+1, 0)
	cw.write([]byte(hdr))
	cw.write(append([]byte(name), 0))
	cw.pad()
}

// File adds a regular file.
func (cw *Writer) File(name string, perm uint32, data []byte) error {
	return cw.Add(Entry{Name: name, Mode: ModeReg | perm, Data: data})
}

// Dir adds a directory.
func (cw *Writer) Dir(name string) error { return cw.Add(Entry{Name: name, Mode: ModeDir | 0o755}) }

// CharDev adds a character device node.
func (cw *Writer) CharDev(name string, perm, major, minor uint32) error {
	return cw.Add(Entry{Name: name, Mode: ModeChr | perm, RMajor: major, RMin: minor})
}

// Close writes the trailer and flushes; it does not close the underlying
// writer.
func (cw *Writer) Close() error {
	cw.header("TRAILER!!!", Entry{})
	if cw.err == nil {
		if r := cw.off % 512; r != 0 {
			cw.write(make([]byte, 512-r))
		}
	}
	if cw.err != nil {
		return cw.err
	}
	return cw.w.Flush()
}

// Spec is what goes into an agent initramfs.
type Spec struct {
	Init  []byte            // the agent binary, installed as /init
	Files map[string][]byte // more files ("patcheval/plan.json" -> JSON)
	Gzip  bool
	// Append are ready newc archives (the userland's tools and libraries)
	// written after this one; the kernel unpacks concatenated archives in
	// order.
	Append []string
}

// Write writes the initramfs for spec to w.
func Write(w io.Writer, spec Spec) error {
	var gz *gzip.Writer
	if spec.Gzip {
		gz, _ = gzip.NewWriterLevel(w, gzip.BestSpeed)
		gz.ModTime = time.Time{}
		w = gz
	}
	cw := NewWriter(w)
	for _, d := range []string{"dev", "proc", "sys", "tmp", "root"} {
		cw.Dir(d)
	}
	cw.CharDev("dev/console", 0o600, 5, 1)
	cw.CharDev("dev/null", 0o666, 1, 3)
	cw.File("init", 0o755, spec.Init)
	names := make([]string, 0, len(spec.Files))
	for n := range spec.Files {
		names = append(names, n)
	}
	sortStrings(names)
	for _, n := range names {
		if err := cw.File(n, 0o644, spec.Files[n]); err != nil {
			return err
		}
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("writing initramfs: %w", err)
	}
	for _, a := range spec.Append {
		f, err := os.Open(a)
		if err != nil {
			return fmt.Errorf("initramfs: appending %s: %w", a, err)
		}
		_, err = io.Copy(w, f)
		f.Close()
		if err != nil {
			return fmt.Errorf("initramfs: appending %s: %w", a, err)
		}
	}
	if gz != nil {
		return gz.Close()
	}
	return nil
}

// WriteFile writes the initramfs for spec to path (atomically).
func WriteFile(path string, spec Spec) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if err := Write(f, spec); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
