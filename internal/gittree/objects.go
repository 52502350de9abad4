package gittree

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"container/list"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/objfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// objectReader reads whole objects from a repository's pack files and
// loose objects and is safe for concurrent use: pack indexes are read in
// place (packIndex), packs with ReadAt, and decoded delta bases are shared
// in one cache keyed by pack offset (no hashing of what is read). A miss
// looks again for packs written since (a fetch, a repack) before it says
// the object is missing.
//
// It exists because go-git's storage is not safe for concurrent readers,
// hashes every object it caches (which made a 78k-file checkout several
// times slower than git), and loads every pack index whole on open.
type objectReader struct {
	mu      sync.RWMutex
	packs   []*packReader
	known   map[string]bool // pack index paths opened
	objdirs []string        // the repository's objects directory, then its alternates
	cache   *baseCache
	closed  bool
	last    atomic.Int32 // the pack of the last hit (locate)
	win     window       // read-ahead for walks (WalkObject)
}

// errClosed is what reads after Close return: a commit or tree kept past
// its storage's Close must fail loudly, not look like a missing object.
var errClosed = errors.New("read objects: the repository's storage is closed (use gittree.Open and close it after the last read)")

type packReader struct {
	idx  *packIndex
	f    *os.File
	size int64
}

// newObjectReader opens the pack indexes of the objects directories
// (the repository's and its alternates).
func newObjectReader(d Dirs, cacheBytes int) (*objectReader, error) {
	r := &objectReader{cache: newBaseCache(cacheBytes), known: map[string]bool{}}
	seen := map[string]bool{}
	var addDir func(objdir string, depth int)
	addDir = func(objdir string, depth int) {
		objdir = filepath.Clean(objdir)
		if seen[objdir] || depth > 5 {
			return
		}
		seen[objdir] = true
		r.objdirs = append(r.objdirs, objdir)
		if b, err := os.ReadFile(filepath.Join(objdir, "info", "alternates")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				l = strings.TrimSpace(l)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				if !filepath.IsAbs(l) {
					l = filepath.Join(objdir, l)
				}
				addDir(l, depth+1)
			}
		}
	}
	addDir(filepath.Join(d.CommonDir, "objects"), 0)
	if _, err := r.rescan(); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// rescan opens the packs not opened yet; it reports whether it found any.
func (r *objectReader) rescan() (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false, errClosed
	}
	added := false
	for _, objdir := range r.objdirs {
		idxs, _ := filepath.Glob(filepath.Join(objdir, "pack", "*.idx"))
		for _, ip := range idxs {
			if r.known[ip] {
				continue
			}
			pp := strings.TrimSuffix(ip, ".idx") + ".pack"
			ok, err := r.addPack(ip, pp)
			if err != nil {
				return added, err
			}
			if ok {
				r.known[ip] = true
				added = true
			}
		}
	}
	return added, nil
}

func (r *objectReader) addPack(idxPath, packPath string) (bool, error) {
	f, err := os.Open(packPath)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil // an .idx without its pack (being written or removed)
	}
	if err != nil {
		return false, objErr(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return false, objErr(err)
	}
	idx, err := openPackIndex(idxPath)
	if err != nil {
		f.Close()
		if errors.Is(err, os.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	r.packs = append(r.packs, &packReader{idx: idx, f: f, size: fi.Size()})
	return true, nil
}

func objErr(err error) error { return fmt.Errorf("read objects: %w", err) }

// Close closes the pack files.
func (r *objectReader) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.packs {
		p.f.Close()
		p.idx.close()
	}
	r.packs = nil
	r.closed = true
}

func (r *objectReader) isClosed() bool {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.closed
}

func (r *objectReader) pack(i int) *packReader {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.packs[i]
}

// locate finds h in the packs: (pack number, offset). The pack of the
// last hit is searched first (as git does): a walk reads objects of one
// pack in a row, and a search that misses costs as much as one that hits.
func (r *objectReader) locate(h plumbing.Hash) (int, int64, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	last := int(r.last.Load())
	if last < len(r.packs) {
		if off, ok := r.packs[last].idx.find(h); ok {
			return last, off, true
		}
	}
	for i, p := range r.packs {
		if i == last {
			continue
		}
		if off, ok := p.idx.find(h); ok {
			r.last.Store(int32(i))
			return i, off, true
		}
	}
	return 0, 0, false
}

// Has reports whether the repository has the object h (in a pack or
// loose), without reading it.
func (r *objectReader) Has(h plumbing.Hash) bool {
	if _, _, ok := r.locate(h); ok {
		return true
	}
	for _, d := range r.objdirs {
		if _, err := os.Stat(looseName(d, h)); err == nil {
			return true
		}
	}
	if added, _ := r.rescan(); added {
		_, _, ok := r.locate(h)
		return ok
	}
	return false
}

func looseName(objdir string, h plumbing.Hash) string {
	s := h.String()
	return filepath.Join(objdir, s[:2], s[2:])
}

// Object returns the type and the content of the object h. The content
// may be shared with the cache: callers must not modify it.
func (r *objectReader) Object(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	if i, off, ok := r.locate(h); ok {
		return r.readAt(i, off, 0, false)
	}
	if r.isClosed() {
		return 0, nil, errClosed
	}
	t, b, err := r.loose(h)
	if err != plumbing.ErrObjectNotFound {
		return t, b, err
	}
	if added, err := r.rescan(); err != nil {
		return 0, nil, err
	} else if added {
		if i, off, ok := r.locate(h); ok {
			return r.readAt(i, off, 0, false)
		}
	}
	return 0, nil, plumbing.ErrObjectNotFound
}

// WalkObject is Object for a walk over history that reads one commit
// after another: the object is read through a read-ahead window of its
// pack and not kept in the cache of delta bases. git writes a pack's
// commits together, newest first, so the next commit of a walk is
// usually among the bytes read for the last: one read of 64 KB serves
// some two hundred commits where each needed its own before (git maps
// its packs whole and reads them without a system call). Only the
// commits are windowed: the cost in memory is one window per storage,
// not the pages of every blob a checkout reads (which mapping the pack
// would add to the process's resident size).
func (r *objectReader) WalkObject(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	if i, off, ok := r.locate(h); ok {
		return r.readAt(i, off, 0, true)
	}
	return r.Object(h)
}

// windowSize is the read-ahead of a walk.
const windowSize = 64 << 10

// window holds the bytes last read ahead from one pack.
type window struct {
	mu   sync.Mutex
	p    *packReader
	off  int64 // of buf[0] in the pack
	buf  []byte
	last int64 // the offset asked for last
}

// at returns the pack's bytes from off on: at least chunkSize of them,
// or up to the end of the pack. A miss reads windowSize bytes from off
// on, or, when the walk goes towards the start of the pack (offsets
// falling: a pack fast-import wrote, oldest first), the window ending
// just past off.
func (w *window) at(p *packReader, off int64) ([]byte, error) {
	if w.p == p && off >= w.off {
		end := w.off + int64(len(w.buf))
		if off+chunkSize <= end || end == p.size && off < end {
			w.last = off
			return w.buf[off-w.off:], nil
		}
	}
	start := off
	if w.p == p && off < w.last {
		start = max(0, off+chunkSize-windowSize)
	}
	if w.buf == nil {
		w.buf = make([]byte, windowSize)
	}
	n, err := p.f.ReadAt(w.buf[:cap(w.buf)], start)
	if n <= int(off-start) {
		w.p = nil
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, objErr(err)
	}
	w.p, w.off, w.buf, w.last = p, start, w.buf[:n], off
	return w.buf[off-start:], nil
}

// loose reads a loose object.
func (r *objectReader) loose(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	for _, d := range r.objdirs {
		f, err := os.Open(looseName(d, h))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, nil, objErr(err)
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return 0, nil, objErr(err)
		}
		or, err := objfile.NewReader(f)
		if err != nil {
			return 0, nil, fmt.Errorf("loose object %s: %v", h, err)
		}
		defer or.Close()
		t, size, err := or.Header()
		if err != nil {
			return 0, nil, fmt.Errorf("loose object %s: %v", h, err)
		}
		if size < 0 || uint64(size) > maxInflated(uint64(fi.Size())) {
			return 0, nil, fmt.Errorf("loose object %s: corrupt: its header says %d bytes, more than its %d bytes can inflate to", h, size, fi.Size())
		}
		b := make([]byte, size)
		if _, err := io.ReadFull(or, b); err != nil {
			return 0, nil, fmt.Errorf("loose object %s: %v", h, err)
		}
		if err := atEnd(or); err != nil {
			return 0, nil, fmt.Errorf("loose object %s: %v", h, err)
		}
		return t, b, nil
	}
	return 0, nil, plumbing.ErrObjectNotFound
}

type cacheKey struct {
	pack int
	off  int64
}

var zlibPool sync.Pool

// chunkSize is the first read of an object: its header and up to ~4 KB
// of compressed data (a commit, a small tree or blob whole).
const chunkSize = 4096

var chunkPool = sync.Pool{New: func() any { return new([chunkSize]byte) }}

// readAt decodes the object at off in pack i, resolving delta chains.
// A walk's read (WalkObject) goes through the window when no other read
// holds it, and is not cached.
func (r *objectReader) readAt(i int, off int64, depth int, walk bool) (plumbing.ObjectType, []byte, error) {
	if t, b, ok := r.cache.get(cacheKey{i, off}); ok {
		return t, b, nil
	}
	if depth > 10000 {
		return 0, nil, fmt.Errorf("delta chain too deep at offset %d", off)
	}
	p := r.pack(i)
	// One read for the header and, for most commits and trees, the whole
	// compressed body; a longer body is read on from the file.
	var h []byte
	if walk && r.win.mu.TryLock() {
		defer r.win.mu.Unlock()
		b, err := r.win.at(p, off)
		if err != nil {
			return 0, nil, err
		}
		h = b
	} else {
		walk = false
		chunk := chunkPool.Get().(*[chunkSize]byte)
		defer chunkPool.Put(chunk)
		n, err := p.f.ReadAt(chunk[:], off)
		if n == 0 && err != nil {
			return 0, nil, objErr(err)
		}
		h = chunk[:n]
	}
	pos := 0
	next := func() (byte, error) {
		if pos >= len(h) {
			return 0, fmt.Errorf("pack %s: truncated object header at offset %d", p.f.Name(), off)
		}
		c := h[pos]
		pos++
		return c, nil
	}
	c, err := next()
	if err != nil {
		return 0, nil, err
	}
	typ := plumbing.ObjectType((c >> 4) & 7)
	size := uint64(c & 15)
	shift := 4
	for c&0x80 != 0 {
		if c, err = next(); err != nil {
			return 0, nil, err
		}
		size |= uint64(c&0x7f) << shift
		shift += 7
	}
	var baseOff int64 = -1
	var baseHash plumbing.Hash
	switch typ {
	case plumbing.OFSDeltaObject:
		if c, err = next(); err != nil {
			return 0, nil, err
		}
		ofs := uint64(c & 0x7f)
		for c&0x80 != 0 {
			if c, err = next(); err != nil {
				return 0, nil, err
			}
			ofs = ((ofs + 1) << 7) | uint64(c&0x7f)
		}
		baseOff = off - int64(ofs)
	case plumbing.REFDeltaObject:
		if pos+20 > len(h) {
			return 0, nil, fmt.Errorf("pack %s: truncated ref-delta at offset %d", p.f.Name(), off)
		}
		copy(baseHash[:], h[pos:pos+20])
		pos += 20
	case plumbing.CommitObject, plumbing.TreeObject, plumbing.BlobObject, plumbing.TagObject:
	default:
		return 0, nil, fmt.Errorf("pack %s: bad object type %d at offset %d", p.f.Name(), typ, off)
	}
	// A damaged header may claim any size: refuse, before allocating it,
	// one that the rest of the pack cannot inflate to.
	if left := max(p.size-off-int64(pos), 0); size > maxInflated(uint64(left)) {
		return 0, nil, fmt.Errorf("pack %s: corrupt object at offset %d: its header says %d bytes, more than the %d bytes left in the pack can inflate to", p.f.Name(), off, size, left)
	}
	data, err := p.inflate(h[pos:], off+int64(pos), size)
	if err != nil {
		return 0, nil, fmt.Errorf("pack %s: object at offset %d: %v", p.f.Name(), off, err)
	}
	if typ != plumbing.OFSDeltaObject && typ != plumbing.REFDeltaObject {
		if !walk {
			r.cache.put(cacheKey{i, off}, typ, data)
		}
		return typ, data, nil
	}
	var bt plumbing.ObjectType
	var base []byte
	if typ == plumbing.OFSDeltaObject {
		bt, base, err = r.readAt(i, baseOff, depth+1, false)
	} else {
		bt, base, err = r.Object(baseHash)
	}
	if err != nil {
		return 0, nil, err
	}
	out, err := packfile.PatchDelta(base, data)
	if err != nil {
		return 0, nil, fmt.Errorf("pack %s: delta at offset %d: %v", p.f.Name(), off, err)
	}
	r.cache.put(cacheKey{i, off}, bt, out)
	return bt, out, nil
}

// inflate decodes the zlib stream of size bytes at off in the pack, of
// which head (the rest of the first read) holds the start. A stream that
// head holds whole (most commits and trees, small blobs) is decoded from
// it (inflateTo); a longer one up to inMemoryMax is read whole, its
// length guessed (three quarters of size: text compresses better, trees
// of hashes not much) and the guess doubled until it holds it. A larger
// object, or a stream longer than twice its content (no zlib writes
// that), streams through compress/zlib: no buffer of its compressed size.
func (p *packReader) inflate(head []byte, off int64, size uint64) ([]byte, error) {
	end := off + int64(len(head))
	stream := func() ([]byte, error) {
		return inflate(io.MultiReader(bytes.NewReader(head), io.NewSectionReader(p.f, end, p.size-end)), size)
	}
	if size > inMemoryMax {
		return stream()
	}
	data := make([]byte, size)
	_, err := inflateTo(data, head)
	if err != errShortInput {
		return data, err
	}
	if end >= p.size {
		return nil, io.ErrUnexpectedEOF
	}
	guess := int64(size)*3/4 + 512
	for limit := 2*int64(size) + 64<<10; ; {
		if guess > limit {
			return stream()
		}
		n := min(max(guess, int64(len(head))*2), p.size-off)
		bp := bufPool.Get().(*[]byte)
		buf := (*bp)[:0]
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := p.f.ReadAt(buf, off); err != nil && err != io.EOF {
			return nil, err
		}
		_, err := inflateTo(data, buf)
		*bp = buf
		bufPool.Put(bp)
		if err != errShortInput {
			return data, err
		}
		if off+n >= p.size {
			return nil, io.ErrUnexpectedEOF
		}
		guess = n * 2
	}
}

// inMemoryMax is the largest object inflate decodes from a buffer of its
// compressed bytes; larger ones stream.
const inMemoryMax = 1 << 20

// maxInflated is the most n bytes of a zlib stream can decode to:
// deflate codes at best 258 bytes (a match) in 2 bits, 1032 to a byte;
// the 64 covers a stream of a few bytes (header, one block, trailer).
func maxInflated(n uint64) uint64 {
	if n > 1<<50 {
		return math.MaxUint64
	}
	return 1032*n + 64
}

// streamAlloc is the most the streaming inflate allocates before it has
// decoded that much: a size larger than that (a large blob, or a damaged
// header in a pack large enough to pass maxInflated) is allocated as the
// stream decodes.
const streamAlloc = 64 << 20

var bufPool = sync.Pool{New: func() any { return new([]byte) }}

type zreader struct {
	br *bufio.Reader
	zr io.ReadCloser
}

// inflate decompresses the zlib stream of size bytes in src through
// compress/zlib (objects larger than inMemoryMax), checked as inflateTo
// checks (the checksum, a stream of exactly size bytes). A source that is an
// io.ByteReader is read directly; any other through the pooled
// bufio.Reader.
func inflate(src io.Reader, size uint64) ([]byte, error) {
	z, _ := zlibPool.Get().(*zreader)
	if z == nil {
		z = &zreader{br: bufio.NewReaderSize(nil, 16<<10)}
	}
	in := src
	if _, ok := src.(io.ByteReader); !ok {
		z.br.Reset(src)
		in = z.br
	}
	var err error
	if z.zr == nil {
		z.zr, err = zlib.NewReader(in)
	} else {
		err = z.zr.(zlib.Resetter).Reset(in, nil)
	}
	if err != nil {
		return nil, err
	}
	defer zlibPool.Put(z)
	buf := make([]byte, 0, min(size, streamAlloc))
	for uint64(len(buf)) < size {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, int(min(size-uint64(len(buf)), uint64(len(buf)))))
		}
		n, err := z.zr.Read(buf[len(buf):int(min(uint64(cap(buf)), size))])
		buf = buf[:len(buf)+n]
		if err == io.EOF && uint64(len(buf)) < size {
			return nil, errSizeDiffer
		}
		if err != nil && err != io.EOF {
			return nil, err
		}
	}
	if err := atEnd(z.zr); err != nil {
		return nil, err
	}
	return buf, nil
}

// atEnd checks that the zlib stream read by zr ends here: compress/zlib
// checks the Adler-32 only when a read reaches the end, and a stream
// that decodes on past the object's size is not the object's.
func atEnd(zr io.Reader) error {
	var one [1]byte
	for {
		n, err := zr.Read(one[:])
		if n > 0 {
			return errSizeDiffer
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// baseCache is a byte-bounded LRU of decoded objects keyed by pack offset.
type baseCache struct {
	mu    sync.Mutex
	max   int
	size  int
	ll    *list.List
	items map[cacheKey]*list.Element
}

type cacheItem struct {
	k cacheKey
	t plumbing.ObjectType
	b []byte
}

func newBaseCache(max int) *baseCache {
	return &baseCache{max: max, ll: list.New(), items: map[cacheKey]*list.Element{}}
}

func (c *baseCache) get(k cacheKey) (plumbing.ObjectType, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.ll.MoveToFront(e)
		it := e.Value.(*cacheItem)
		return it.t, it.b, true
	}
	return 0, nil, false
}

func (c *baseCache) put(k cacheKey, t plumbing.ObjectType, b []byte) {
	if len(b) > c.max/8 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.ll.PushFront(&cacheItem{k, t, b})
	c.size += len(b)
	for c.size > c.max {
		e := c.ll.Back()
		it := e.Value.(*cacheItem)
		c.ll.Remove(e)
		delete(c.items, it.k)
		c.size -= len(it.b)
	}
}
