package gittree

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// packObj is an object of a pack written by hand (writePack): its
// header as written (any size it claims) and its zlib stream.
type packObj struct {
	name plumbing.Hash // "" names it by its position
	typ  plumbing.ObjectType
	size uint64 // what the header claims
	z    []byte
}

// objHeader is a pack object's header: type and size, 4 bits then 7 a byte.
func objHeader(typ plumbing.ObjectType, size uint64) []byte {
	b := []byte{byte(typ)<<4 | byte(size&15)}
	for size >>= 4; size != 0; size >>= 7 {
		b[len(b)-1] |= 0x80
		b = append(b, byte(size&0x7f))
	}
	return b
}

// writePack writes a pack and its index of these objects into the
// objects directory of a new repository directory and returns the
// directory, the objects' names and offsets. Nothing checks the names:
// an object is found by the name it is given.
func writePack(t *testing.T, objs []packObj) (string, []plumbing.Hash, []int64) {
	t.Helper()
	dir := t.TempDir()
	packDir := filepath.Join(dir, "objects", "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		t.Fatal(err)
	}
	var pack bytes.Buffer
	pack.WriteString("PACK\x00\x00\x00\x02")
	pack.Write([]byte{0, 0, byte(len(objs) >> 8), byte(len(objs))})
	w := new(idxfile.Writer)
	w.OnHeader(uint32(len(objs)))
	var names []plumbing.Hash
	var offs []int64
	for i, o := range objs {
		h := o.name
		if h.IsZero() {
			h = plumbing.Hash(sha1.Sum([]byte(fmt.Sprint("object ", i))))
		}
		off := int64(pack.Len())
		pack.Write(objHeader(o.typ, o.size))
		pack.Write(o.z)
		w.Add(h, uint64(off), 0)
		names = append(names, h)
		offs = append(offs, off)
	}
	sum := sha1.Sum(pack.Bytes())
	pack.Write(sum[:])
	w.OnFooter(plumbing.Hash(sum))
	idx, err := w.Index()
	if err != nil {
		t.Fatal(err)
	}
	var ib bytes.Buffer
	if _, err := idxfile.NewEncoder(&ib).Encode(idx); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(packDir, fmt.Sprintf("pack-%x", sum))
	if err := os.WriteFile(base+".pack", pack.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(base+".idx", ib.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, names, offs
}

func zlibOf(data []byte) []byte {
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	return b.Bytes()
}

func randomBytes(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

// TestDamagedSizeRefused: an object whose header claims more bytes than
// the rest of the pack can inflate to (2^40 here, a damaged header) is
// refused as corrupt, with its pack and offset, before anything of that
// size is allocated (which crashed the process): one at the pack's end
// (read whole by the first read, which took the in-memory path for any
// size), one inside a walk's window, one of 3 MB a few bytes before the
// end; read by Object and by WalkObject. The pack's other objects read
// on, among them a 2 MiB one at the pack's end (streamed).
func TestDamagedSizeRefused(t *testing.T) {
	small := []byte("hello\n")
	random := randomBytes(1, 100<<10)
	zeros := make([]byte, 2<<20)
	objs := []packObj{
		{typ: plumbing.BlobObject, size: uint64(len(small)), z: zlibOf(small)},
		{typ: plumbing.BlobObject, size: 1 << 40, z: zlibOf(small)},              // 1: inside the window
		{typ: plumbing.BlobObject, size: uint64(len(random)), z: zlibOf(random)}, // 2: past the window
		{typ: plumbing.BlobObject, size: 3 << 20, z: zlibOf(small)},              // 3: 3 MB from a few bytes
		{typ: plumbing.BlobObject, size: uint64(len(zeros)), z: zlibOf(zeros)},   // 4: streamed
		{typ: plumbing.BlobObject, size: 1 << 40, z: zlibOf(small)},              // 5: at the end
	}
	dir, names, offs := writePack(t, objs)
	r, err := newObjectReader(Dirs{GitDir: dir, CommonDir: dir}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, read := range []struct {
		name string
		f    func(plumbing.Hash) (plumbing.ObjectType, []byte, error)
	}{{"Object", r.Object}, {"WalkObject", r.WalkObject}} {
		for _, i := range []int{1, 3, 5} {
			_, _, err := read.f(names[i])
			want := fmt.Sprintf("corrupt object at offset %d", offs[i])
			if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), ".pack") {
				t.Errorf("%s of object %d: %v, want an error saying %q in its pack", read.name, i, err, want)
			}
		}
		for i, want := range map[int][]byte{0: small, 2: random, 4: zeros} {
			typ, b, err := read.f(names[i])
			if err != nil || typ != plumbing.BlobObject || !bytes.Equal(b, want) {
				t.Errorf("%s of object %d: %v %v, same content %v", read.name, i, typ, err, bytes.Equal(b, want))
			}
		}
	}
}

// TestStreamAllocatesAsItDecodes: the streaming inflate allocates a
// claimed size past streamAlloc only as the stream decodes (a damaged
// header in a pack large enough to pass maxInflated), and refuses a
// stream shorter than the size.
func TestStreamAllocatesAsItDecodes(t *testing.T) {
	if _, err := inflate(bytes.NewReader(zlibOf([]byte("hello\n"))), 1<<40); err != errSizeDiffer {
		t.Errorf("6 bytes claimed as 2^40: %v, want errSizeDiffer", err)
	}
	data := bytes.Repeat(randomBytes(2, 4093), streamAlloc/4093*5/4) // past the first allocation
	if b, err := inflate(bytes.NewReader(zlibOf(data)), uint64(len(data))); err != nil || !bytes.Equal(b, data) {
		t.Errorf("%d bytes: %v, same %v", len(data), err, bytes.Equal(b, data))
	}
}

// TestStreamedObjectChecked: an object over inMemoryMax (streamed) is
// refused when its stream decodes to more than its header's size or its
// checksum is damaged, as inflateTo refuses a smaller one (reading
// exactly size bytes never reached the checksum nor the stream's end).
func TestStreamedObjectChecked(t *testing.T) {
	var text strings.Builder
	for i := 0; text.Len() < inMemoryMax*3/2; i++ {
		fmt.Fprintf(&text, "line %d of a large text file\n", i)
	}
	data := []byte(text.String())
	z := zlibOf(data)
	// A stream whose last block is an empty one after a flush (a writer
	// that flushed before it closed): a read of size bytes ends before
	// that block, before the checksum.
	var flushed bytes.Buffer
	zw := zlib.NewWriter(&flushed)
	zw.Write(data)
	zw.Flush()
	zw.Close()
	badSum := flushed.Bytes()
	badSum[len(badSum)-1] ^= 1
	objs := []packObj{
		{typ: plumbing.BlobObject, size: uint64(len(data)), z: z},
		{typ: plumbing.BlobObject, size: uint64(len(data)) - 1, z: z}, // the stream is a byte longer
		{typ: plumbing.BlobObject, size: uint64(len(data)), z: badSum},
	}
	dir, names, offs := writePack(t, objs)
	r, err := newObjectReader(Dirs{GitDir: dir, CommonDir: dir}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, read := range []struct {
		name string
		f    func(plumbing.Hash) (plumbing.ObjectType, []byte, error)
	}{{"Object", r.Object}, {"WalkObject", r.WalkObject}} {
		if _, b, err := read.f(names[0]); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s of the sound object: %v, same %v", read.name, err, bytes.Equal(b, data))
		}
		for i, what := range map[int]string{1: "a stream longer than its size", 2: "a damaged checksum"} {
			_, _, err := read.f(names[i])
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("offset %d", offs[i])) {
				t.Errorf("%s of %s: %v, want an error naming offset %d", read.name, what, err, offs[i])
			}
		}
	}
}
