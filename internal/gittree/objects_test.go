package gittree

import (
	"bytes"
	"cmp"
	"compress/zlib"
	"crypto/sha1"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// TestWalkWindowEdges reads every object of a pack git wrote (some
// thousand objects over several windows, blobs larger than a window
// among them) through WalkObject in ascending, then descending offset
// order, the object at the pack's end included, and compares each with
// Object of another reader (no window, its own cache); then with the
// window held by another read (TryLock fails), which reads past it.
func TestWalkWindowEdges(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	var fi bytes.Buffer
	var text strings.Builder
	for i := range 300 {
		fmt.Fprintf(&text, "line %d\n", i)
		fmt.Fprintf(&fi, "commit refs/heads/main\ncommitter C <c@example.org> %d +0000\ndata <<EOM\ncommit %d\nEOM\n", 1700000000+i, i)
		fmt.Fprintf(&fi, "M 644 inline f.txt\ndata %d\n%s\n", text.Len(), text.String())
		if i%25 == 0 {
			n := 20 << 10
			if i == 100 {
				n = 100 << 10 // larger than a window
			}
			b := randomBytes(uint64(i), n)
			fmt.Fprintf(&fi, "M 644 inline r%d\ndata %d\n", i, len(b))
			fi.Write(b)
			fi.WriteString("\n")
		}
	}
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = dir, &fi
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, out)
	}
	gitT(t, dir, "repack", "-adq")
	// A second pack (fast-import writes one) whose objects are read
	// between the first's: a window is of one pack.
	fi.Reset()
	for i := range 20 {
		fmt.Fprintf(&fi, "commit refs/heads/other\ncommitter C <c@example.org> %d +0000\ndata <<EOM\nother %d\nEOM\n", 1800000000+i, i)
		fmt.Fprintf(&fi, "M 644 inline g.txt\ndata %d\n%s\n", i+1, strings.Repeat("g", i+1))
	}
	cmd = exec.Command("git", "-c", "fastimport.unpackLimit=1", "fast-import", "--quiet")
	cmd.Dir, cmd.Stdin = dir, &fi
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, out)
	}
	walk, err := newObjectReader(Dirs{GitDir: filepath.Join(dir, ".git"), CommonDir: filepath.Join(dir, ".git")}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer walk.Close()
	ref, err := newObjectReader(Dirs{GitDir: filepath.Join(dir, ".git"), CommonDir: filepath.Join(dir, ".git")}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	if len(walk.packs) != 2 {
		t.Fatalf("%d packs, want 2", len(walk.packs))
	}
	type obj struct {
		h   plumbing.Hash
		off int64
	}
	byOffset := func(p *packReader) []obj {
		var objs []obj
		for i := range p.idx.n {
			var h plumbing.Hash
			copy(h[:], p.idx.names[i*20:])
			off, _ := p.idx.offset(i)
			objs = append(objs, obj{h, off})
		}
		slices.SortFunc(objs, func(a, b obj) int { return cmp.Compare(a.off, b.off) })
		return objs
	}
	p, other := walk.packs[0], walk.packs[1]
	if p.idx.n < other.idx.n {
		p, other = other, p
	}
	objs, others := byOffset(p), byOffset(other)
	if p.size < 3*windowSize || len(objs) < 500 {
		t.Fatalf("a pack of %d bytes, %d objects: want 3 windows, 500 objects", p.size, len(objs))
	}
	t.Logf("%d objects in a pack of %d bytes (%.1f windows), %d in the other", len(objs), p.size, float64(p.size)/windowSize, len(others))
	check := func(how string, o obj) {
		t.Helper()
		typ, b, err := walk.WalkObject(o.h)
		wtyp, wb, werr := ref.Object(o.h)
		if err != nil || werr != nil || typ != wtyp || !bytes.Equal(b, wb) {
			t.Fatalf("%s: object %s at offset %d: WalkObject %v %v, Object %v %v, same content %v", how, o.h, o.off, typ, err, wtyp, werr, bytes.Equal(b, wb))
		}
	}
	for _, order := range []string{"ascending", "descending"} {
		windows := map[int64]bool{}
		atEnd := false
		for k := range objs {
			o := objs[k]
			if order == "descending" {
				o = objs[len(objs)-1-k]
			}
			check(order, o)
			if walk.win.p == p {
				windows[walk.win.off] = true
				atEnd = atEnd || walk.win.off+int64(len(walk.win.buf)) == p.size
			}
			if k%40 == 39 {
				check(order+", the other pack", others[k/40%len(others)])
			}
		}
		if len(windows) < 3 || !atEnd {
			t.Errorf("%s: %d windows read, one at the pack's end %v", order, len(windows), atEnd)
		}
	}
	// Another read holds the window: a walk's read goes past it.
	walk.win.mu.Lock()
	woff, wlen := walk.win.off, len(walk.win.buf)
	for _, o := range []obj{objs[0], objs[len(objs)/2], objs[len(objs)-1]} {
		check("window held", o)
	}
	if walk.win.off != woff || len(walk.win.buf) != wlen {
		t.Error("a read moved the window another read holds")
	}
	walk.win.mu.Unlock()
}

// TestWindowAt holds the window to its word on a file of random bytes:
// at(off) returns the file's bytes from off on, at least chunkSize of
// them or up to the end, in walks up and down by steps of up to a chunk,
// at and across every window's edge and the end, and by jumps; a walk
// reads each window once; past the end is an error.
func TestWindowAt(t *testing.T) {
	data := randomBytes(3, 5*windowSize+12345)
	path := filepath.Join(t.TempDir(), "pack")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p := &packReader{f: f, size: int64(len(data))}
	var w window
	reads := 0
	at := func(off int64) {
		t.Helper()
		before, blen := w.off, len(w.buf)
		b, err := w.at(p, off)
		if err != nil || len(b) < min(chunkSize, len(data)-int(off)) || !bytes.Equal(b, data[off:off+int64(len(b))]) {
			t.Fatalf("at(%d): %d bytes, %v, the file's %v", off, len(b), err, err == nil && bytes.Equal(b, data[off:off+int64(len(b))]))
		}
		if w.off != before || len(w.buf) != blen {
			reads++
		}
	}
	rng := rand.New(rand.NewPCG(8, 9))
	size := int64(len(data))
	// Up, then down, by steps of up to a chunk: each window read once
	// (a window serves windowSize-chunkSize bytes of offsets).
	for off := int64(0); off < size; off += 1 + rng.Int64N(chunkSize) {
		at(off)
	}
	at(size - 1)
	if max := size/(windowSize-chunkSize) + 2; int64(reads) > max {
		t.Errorf("a walk up read %d windows, want at most %d", reads, max)
	}
	reads = 0
	for off := size - 1; off >= 0; off -= 1 + rng.Int64N(chunkSize) {
		at(off)
	}
	at(0)
	if max := size/(windowSize-chunkSize) + 2; int64(reads) > max {
		t.Errorf("a walk down read %d windows, want at most %d", reads, max)
	}
	// Each window's edges: the last offsets a window serves whole, the
	// first it does not, from either side.
	for range 20 {
		at(rng.Int64N(size))
		end := w.off + int64(len(w.buf))
		for _, off := range []int64{end - chunkSize - 1, end - chunkSize, end - chunkSize + 1, end - 1, end, end + 1, w.off, w.off - 1} {
			if off >= 0 && off < size {
				at(off)
			}
		}
	}
	for range 2000 {
		at(rng.Int64N(size))
	}
	for _, off := range []int64{size - chunkSize - 1, size - chunkSize, size - 2, size - 1} {
		at(off)
	}
	for _, off := range []int64{size, size + 10} {
		if b, err := w.at(p, off); err == nil {
			t.Errorf("at(%d), past the end of %d bytes: %d bytes, no error", off, size, len(b))
		}
	}
	at(0)
}

// TestDamagedLooseObjectRefused: a loose object whose header claims more
// than its file can inflate to is refused as corrupt before anything of
// that size is allocated; one whose stream goes on past that size, or
// whose checksum is damaged, is refused.
func TestDamagedLooseObjectRefused(t *testing.T) {
	dir := t.TempDir()
	h := plumbing.Hash(sha1.Sum([]byte("damaged")))
	p := looseName(filepath.Join(dir, "objects"), h)
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, zlibOf([]byte("blob 1099511627776\x00hello\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := newObjectReader(Dirs{GitDir: dir, CommonDir: dir}, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, _, err := r.Object(h); err == nil || !strings.Contains(err.Error(), "corrupt") || !strings.Contains(err.Error(), h.String()) {
		t.Errorf("Object: %v, want it refused as corrupt", err)
	}
	// A stream longer than the header's size, a damaged checksum (after
	// an empty last block, which a read of size bytes does not reach).
	var flushed bytes.Buffer
	zw := zlib.NewWriter(&flushed)
	zw.Write([]byte("blob 6\x00hello\n"))
	zw.Flush()
	zw.Close()
	badSum := flushed.Bytes()
	badSum[len(badSum)-1] ^= 1
	for what, z := range map[string][]byte{"longer": zlibOf([]byte("blob 5\x00hello\n")), "bad checksum": badSum} {
		if err := os.WriteFile(p, z, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, b, err := r.Object(h); err == nil {
			t.Errorf("Object of a loose object with a %s stream: %q, no error", what, b)
		}
	}
}
