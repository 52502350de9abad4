package gittree

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sort"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
)

// packIndex finds objects in one pack through its .idx file, read in
// place: a version 2 index is mapped into memory and searched where it
// lies (fan-out table, then a binary search among the names), so opening
// a pack costs the same for 80 thousand objects as for 10 million and
// only the pages a lookup touches are read. go-git's idxfile.MemoryIndex
// instead decodes the whole index on open (and its FindHash builds an
// offset -> hash map of every object on first use): on a linux.git of
// millions of objects that is seconds and hundreds of MB before the first
// object is read. Version 1 indexes (git before 1.5.2) are decoded with
// go-git.
type packIndex struct {
	data   []byte // the mapped file (nil for a decoded v1 index)
	n      int
	names  []byte // n * 20
	offs   []byte // n * 4
	large  []byte // 8 bytes per large offset
	fanout [256]uint32
	mem    *idxfile.MemoryIndex // v1 only
}

var idxMagic = []byte{0xff, 't', 'O', 'c'}

func openPackIndex(path string) (*packIndex, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := fi.Size()
	var head [8]byte
	if _, err := f.ReadAt(head[:], 0); err != nil {
		return nil, fmt.Errorf("pack index %s: %v", path, err)
	}
	if !bytes.Equal(head[:4], idxMagic) {
		// version 1: no magic, starts with the fan-out table.
		idx := idxfile.NewMemoryIndex()
		if _, err := f.Seek(0, 0); err != nil {
			return nil, err
		}
		if err := idxfile.NewDecoder(bufio.NewReaderSize(f, 1<<16)).Decode(idx); err != nil {
			return nil, fmt.Errorf("pack index %s: %v", path, err)
		}
		return &packIndex{mem: idx}, nil
	}
	if v := binary.BigEndian.Uint32(head[4:]); v != 2 {
		return nil, fmt.Errorf("pack index %s: version %d not supported", path, v)
	}
	if size < 8+1024+40 || size > 1<<40 {
		return nil, fmt.Errorf("pack index %s: bad size %d", path, size)
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("pack index %s: mmap: %v", path, err)
	}
	x := &packIndex{data: data}
	for i := range x.fanout {
		x.fanout[i] = binary.BigEndian.Uint32(data[8+4*i:])
		if i > 0 && x.fanout[i] < x.fanout[i-1] {
			x.close()
			return nil, fmt.Errorf("pack index %s: fan-out table not sorted", path)
		}
	}
	x.n = int(x.fanout[255])
	pos := int64(8 + 1024)
	need := pos + int64(x.n)*(20+4+4) + 40
	if need > size {
		x.close()
		return nil, fmt.Errorf("pack index %s: %d objects need %d bytes, the file has %d", path, x.n, need, size)
	}
	x.names = data[pos : pos+int64(x.n)*20]
	pos += int64(x.n) * 20
	pos += int64(x.n) * 4 // CRC32s
	x.offs = data[pos : pos+int64(x.n)*4]
	pos += int64(x.n) * 4
	x.large = data[pos : size-40]
	return x, nil
}

func (x *packIndex) close() {
	if x.data != nil {
		syscall.Munmap(x.data)
		x.data = nil
	}
}

// find returns the pack offset of h.
func (x *packIndex) find(h plumbing.Hash) (int64, bool) {
	if x.mem != nil {
		off, err := x.mem.FindOffset(h)
		return off, err == nil
	}
	lo := 0
	if h[0] > 0 {
		lo = int(x.fanout[h[0]-1])
	}
	hi := int(x.fanout[h[0]])
	// A binary search on the names' first 8 bytes read as one number
	// (they differ between any two of a pack's objects but in one of
	// some 10^19 pairs); the other 12 compared only when those are equal.
	key := binary.BigEndian.Uint64(h[:8])
	names := x.names
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		k := binary.BigEndian.Uint64(names[m*20:])
		if k < key || k == key && bytes.Compare(names[m*20+8:m*20+20], h[8:]) < 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo >= len(names)/20 || !bytes.Equal(names[lo*20:lo*20+20], h[:]) {
		return 0, false
	}
	return x.offset(lo)
}

func (x *packIndex) offset(i int) (int64, bool) {
	o := binary.BigEndian.Uint32(x.offs[i*4:])
	if o&0x80000000 == 0 {
		return int64(o), true
	}
	j := int(o & 0x7fffffff)
	if (j+1)*8 > len(x.large) {
		return 0, false
	}
	return int64(binary.BigEndian.Uint64(x.large[j*8:])), true
}

// withPrefix appends the names starting with prefix to out.
func (x *packIndex) withPrefix(prefix []byte, out []plumbing.Hash) []plumbing.Hash {
	if x.mem != nil {
		it, err := x.mem.Entries()
		if err != nil {
			return out
		}
		defer it.Close()
		for e, err := it.Next(); err == nil; e, err = it.Next() {
			if bytes.HasPrefix(e.Hash[:], prefix) {
				out = append(out, e.Hash)
			}
		}
		return out
	}
	if len(prefix) == 0 {
		return out
	}
	lo := 0
	if prefix[0] > 0 {
		lo = int(x.fanout[prefix[0]-1])
	}
	hi := int(x.fanout[prefix[0]])
	i := lo + sort.Search(hi-lo, func(i int) bool {
		return bytes.Compare(x.names[(lo+i)*20:(lo+i)*20+20], prefix) >= 0
	})
	for ; i < hi && bytes.HasPrefix(x.names[i*20:i*20+20], prefix); i++ {
		var h plumbing.Hash
		copy(h[:], x.names[i*20:])
		out = append(out, h)
	}
	return out
}
