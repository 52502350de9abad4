package gittree

import (
	"bufio"
	"compress/zlib"
	"container/list"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// objectReader reads whole objects from a repository's pack files and is
// safe for concurrent use: the pack indexes are go-git's, the packs are
// read with ReadAt, and decoded delta bases are shared in one cache keyed
// by pack offset (no hashing of what is read). Objects not in a pack
// (loose objects) come from the fallback go-git storage.
//
// It exists because go-git's storage is not safe for concurrent readers
// and hashes every object it caches, which made a 78k-file checkout
// several times slower than git.
type objectReader struct {
	packs    []*packReader
	fallback storer.EncodedObjectStorer
	fbMu     sync.Mutex
	cache    *baseCache
}

type packReader struct {
	idx  *idxfile.MemoryIndex
	f    *os.File
	size int64
}

// newObjectReader opens the pack files of the objects directories
// (the repository's and its alternates).
func newObjectReader(d Dirs, fallback storer.EncodedObjectStorer, cacheBytes int) (*objectReader, error) {
	r := &objectReader{fallback: fallback, cache: newBaseCache(cacheBytes)}
	seen := map[string]bool{}
	var addDir func(objdir string, depth int) error
	addDir = func(objdir string, depth int) error {
		objdir = filepath.Clean(objdir)
		if seen[objdir] || depth > 5 {
			return nil
		}
		seen[objdir] = true
		idxs, _ := filepath.Glob(filepath.Join(objdir, "pack", "*.idx"))
		for _, ip := range idxs {
			pp := strings.TrimSuffix(ip, ".idx") + ".pack"
			if err := r.addPack(ip, pp); err != nil {
				return err
			}
		}
		if b, err := os.ReadFile(filepath.Join(objdir, "info", "alternates")); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				l = strings.TrimSpace(l)
				if l == "" || strings.HasPrefix(l, "#") {
					continue
				}
				if !filepath.IsAbs(l) {
					l = filepath.Join(objdir, l)
				}
				if err := addDir(l, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if err := addDir(filepath.Join(d.CommonDir, "objects"), 0); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

func (r *objectReader) addPack(idxPath, packPath string) error {
	f, err := os.Open(packPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil // an .idx without its pack (being written or removed)
	}
	if err != nil {
		return objErr(err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return objErr(err)
	}
	ib, err := os.Open(idxPath)
	if err != nil {
		f.Close()
		return objErr(err)
	}
	defer ib.Close()
	idx := idxfile.NewMemoryIndex()
	if err := idxfile.NewDecoder(bufio.NewReaderSize(ib, 1<<16)).Decode(idx); err != nil {
		f.Close()
		return fmt.Errorf("pack index %s: %v", idxPath, err)
	}
	r.packs = append(r.packs, &packReader{idx: idx, f: f, size: fi.Size()})
	return nil
}

func objErr(err error) error { return fmt.Errorf("read objects: %w", err) }

// Close closes the pack files.
func (r *objectReader) Close() {
	for _, p := range r.packs {
		p.f.Close()
	}
	r.packs = nil
}

// Object returns the type and the content of the object h.
func (r *objectReader) Object(h plumbing.Hash) (plumbing.ObjectType, []byte, error) {
	for i, p := range r.packs {
		off, err := p.idx.FindOffset(h)
		if err == nil {
			return r.readAt(i, off, 0)
		}
	}
	if r.fallback == nil {
		return 0, nil, plumbing.ErrObjectNotFound
	}
	r.fbMu.Lock()
	defer r.fbMu.Unlock()
	o, err := r.fallback.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return 0, nil, err
	}
	rd, err := o.Reader()
	if err != nil {
		return 0, nil, err
	}
	defer rd.Close()
	b := make([]byte, 0, o.Size())
	b, err = readAllInto(rd, b)
	return o.Type(), b, err
}

func readAllInto(rd io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := rd.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

type cacheKey struct {
	pack int
	off  int64
}

var zlibPool sync.Pool

// readAt decodes the object at off in pack i, resolving delta chains.
func (r *objectReader) readAt(i int, off int64, depth int) (plumbing.ObjectType, []byte, error) {
	if t, b, ok := r.cache.get(cacheKey{i, off}); ok {
		return t, b, nil
	}
	if depth > 10000 {
		return 0, nil, fmt.Errorf("delta chain too deep at offset %d", off)
	}
	p := r.packs[i]
	var hdr [64]byte
	n, err := p.f.ReadAt(hdr[:], off)
	if n == 0 && err != nil {
		return 0, nil, objErr(err)
	}
	h := hdr[:n]
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
	data, err := inflate(io.NewSectionReader(p.f, off+int64(pos), p.size-off-int64(pos)), size)
	if err != nil {
		return 0, nil, fmt.Errorf("pack %s: object at offset %d: %v", p.f.Name(), off, err)
	}
	if typ != plumbing.OFSDeltaObject && typ != plumbing.REFDeltaObject {
		r.cache.put(cacheKey{i, off}, typ, data)
		return typ, data, nil
	}
	var bt plumbing.ObjectType
	var base []byte
	if typ == plumbing.OFSDeltaObject {
		bt, base, err = r.readAt(i, baseOff, depth+1)
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

type zreader struct {
	br *bufio.Reader
	zr io.ReadCloser
}

func inflate(src io.Reader, size uint64) ([]byte, error) {
	z, _ := zlibPool.Get().(*zreader)
	var err error
	if z == nil {
		z = &zreader{br: bufio.NewReaderSize(src, 16<<10)}
		z.zr, err = zlib.NewReader(z.br)
	} else {
		z.br.Reset(src)
		err = z.zr.(zlib.Resetter).Reset(z.br, nil)
	}
	if err != nil {
		return nil, err
	}
	defer zlibPool.Put(z)
	buf := make([]byte, size)
	if _, err := io.ReadFull(z.zr, buf); err != nil {
		return nil, err
	}
	return buf, nil
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
