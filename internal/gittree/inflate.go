package gittree

import (
	"encoding/binary"
	"errors"
	"hash/adler32"
	"math/bits"
	"sync"
)

// inflater decodes a zlib stream (RFC 1950, deflate RFC 1951) that is
// held whole in memory and whose decoded size is known, as every object
// in a pack is: the header gives the size, the stream follows it. It
// writes straight into the object's buffer (no 32 KB window to copy out
// of), reads bits from the slice (no io.ByteReader call per byte) and
// builds its Huffman tables into arrays it keeps (compress/flate zeroes
// and reallocates its tables for every stream). On a history walk, where
// every object is a commit of a few hundred bytes coded with its own
// dynamic Huffman tables, compress/flate spent most of its time building
// those tables: this was half the walk's CPU.
//
// It checks what zlib checks (the header, the codes, distances within
// the output, the Adler-32 trailer) and that the stream decodes to
// exactly the size given. A stream that goes on past the input returns
// errShortInput: the caller reads more of the pack and tries again.
type inflater struct {
	in   []byte
	pos  int    // next byte of in to load into bits
	bits uint64 // loaded bits, the next one lowest
	nb   uint   // how many of bits are loaded

	lit, dist, cl huffTable
	lens          [maxLit + maxDist]uint8
}

const (
	maxLit  = 288 // literal/length symbols, 286 and 287 invalid
	maxDist = 32  // distance symbols, 30 and 31 invalid

	litRoot  = 9 // root table bits (longer codes go to subtables)
	distRoot = 6
	clRoot   = 7 // code length codes are at most 7 bits: one level

	subFlag = 0x100 // a root entry that points to a subtable
	invalid = 0xff  // an entry of no code: its length is more than the bits loaded

	// tableSize holds the root and subtables of any code at these root
	// sizes: zlib's enough.c gives 852 entries for 286 literal/length
	// symbols at 9 root bits, 592 for 30 distance symbols at 6.
	tableSize = 1024
)

var (
	errShortInput = errors.New("zlib stream continues past the bytes read")
	errZlibHeader = errors.New("zlib: bad header")
	errZlibSum    = errors.New("zlib: checksum mismatch")
	errDeflate    = errors.New("deflate: corrupt stream")
	errSizeDiffer = errors.New("deflate: the stream's length differs from the object's size")
)

// huffTable is a two-level decoding table: the root is indexed by the
// next root bits of the stream (deflate codes are read from the lowest
// bit, so the table is indexed by the bit-reversed code); an entry is
// sym<<16 | code length, or for codes longer than root, offset<<16 |
// subFlag | subtable bits; invalid (a length longer than any bit
// buffer) where no code is.
type huffTable struct {
	e    []uint32
	mask uint64
	buf  [tableSize]uint32

	sorted [512]uint16 // scratch of build, kept to spare zeroing it (512: an index masked needs no bounds check)
	longs  [maxLit]longCode
}

type longCode struct {
	sym uint16
	l   uint8
	c   uint32
}

// build makes the table of the canonical code with these lengths (0: a
// symbol not coded). As zlib: an over-subscribed code is refused, an
// incomplete one too unless incomplete is allowed and the code is one
// code of length 1; a code without symbols gives a table of invalid
// entries.
func (t *huffTable) build(lens []uint8, root uint, allowIncomplete, shrink bool) bool {
	count, maxLen := countLengths(lens)
	// With shrink, the root table is no deeper than the longest code
	// (less to fill); codes decodes with the root sizes as constants.
	if shrink {
		root = min(root, max(maxLen, 1))
	}
	t.mask = 1<<root - 1
	size := 1 << root
	t.e = t.buf[:size]
	if maxLen == 0 {
		fillInvalid(t.e)
		return true
	}
	left := unusedCodes(&count)
	if left < 0 {
		return false
	}
	if left > 0 {
		if !allowIncomplete || maxLen != 1 {
			return false
		}
		fillInvalid(t.e)
	}
	next, start := firstCodes(&count)
	t.sortSymbols(lens, &start)
	t.fillRoot(root, &start, &next)
	return t.fillSubtables(root, maxLen, &start, &next)
}

// countLengths counts the codes of each length (count[0] left 0) and
// finds the longest. Most of a small stream's literal/length symbols
// are not coded (no bytes above 127 in a commit): eight lengths are
// tested at a time and only the coded ones visited, here and in
// sortSymbols.
func countLengths(lens []uint8) (count [16]uint16, maxLen uint) {
	i := 0
	for ; i+8 <= len(lens); i += 8 {
		for w := binary.LittleEndian.Uint64(lens[i:]); w != 0; {
			k := bits.TrailingZeros64(w) &^ 7
			count[w>>k&15]++
			w &^= 0xff << k
		}
	}
	for ; i < len(lens); i++ {
		count[lens[i]&15]++
	}
	count[0] = 0
	maxLen = uint(15)
	for maxLen > 0 && count[maxLen] == 0 {
		maxLen--
	}
	return count, maxLen
}

// unusedCodes is how many codes of 15 bits the lengths leave unused: 0
// for a complete code, more for an incomplete one, less than 0 for an
// over-subscribed one.
func unusedCodes(count *[16]uint16) int {
	left := 1
	for l := 1; l <= 15; l++ {
		left = left<<1 - int(count[l])
		if left < 0 {
			return left
		}
	}
	return left
}

// firstCodes are the first code of each length (RFC 1951 3.2.2) and
// where each length's symbols start in canonical order.
func firstCodes(count *[16]uint16) (next [16]uint32, start [17]uint16) {
	code := uint32(0)
	for l := 1; l <= 15; l++ {
		code = (code + uint32(count[l-1])) << 1
		next[l] = code
	}
	for l := 1; l <= 15; l++ {
		start[l+1] = start[l] + count[l]
	}
	return next, start
}

// sortSymbols puts the coded symbols in t.sorted in canonical order: by
// length, then by symbol.
func (t *huffTable) sortSymbols(lens []uint8, start *[17]uint16) {
	sorted := &t.sorted
	pos := *start
	i := 0
	for ; i+8 <= len(lens); i += 8 {
		for w := binary.LittleEndian.Uint64(lens[i:]); w != 0; {
			k := bits.TrailingZeros64(w) &^ 7
			l := w >> k & 15
			sorted[pos[l]&511] = uint16(i + k>>3)
			pos[l]++
			w &^= 0xff << k
		}
	}
	for ; i < len(lens); i++ {
		if l := lens[i] & 15; l != 0 {
			sorted[pos[l]&511] = uint16(i)
			pos[l]++
		}
	}
}

// fillRoot writes the codes up to root bits: each length's codes are
// written into the first 1<<l entries, which are then copied to the
// next 1<<l (a code of l bits is every entry its reversed bits end), so
// the table is filled by copies, not by a store per entry. next moves
// past the codes written.
func (t *huffTable) fillRoot(root uint, start *[17]uint16, next *[16]uint32) {
	sorted := &t.sorted
	i := int(start[1])
	tab := t.e
	for l := uint(1); l <= root; l++ {
		c := next[l]
		for end := int(start[l+1]); i < end; i++ {
			tab[uint(bits.Reverse16(uint16(c))>>(16-l))&(tableSize-1)] = uint32(sorted[i])<<16 | uint32(l)
			c++
		}
		next[l] = c
		if l < root {
			copy(tab[1<<l:2<<l], tab[:1<<l])
		}
	}
}

// fillSubtables writes the codes longer than root bits: those that
// share their first root bits share a subtable, as deep as the longest
// of them (they are contiguous in canonical order, the longest last).
// It is false when the subtables do not fit.
func (t *huffTable) fillSubtables(root, maxLen uint, start *[17]uint16, next *[16]uint32) bool {
	sorted := &t.sorted
	longs := &t.longs
	nl := 0
	i := int(start[root+1])
	for l := root + 1; l <= maxLen; l++ {
		for end := int(start[l+1]); i < end; i++ {
			longs[nl] = longCode{sorted[i], uint8(l), next[l]}
			next[l]++
			nl++
		}
	}
	for g := 0; g < nl; {
		prefix := longs[g].c >> (uint(longs[g].l) - root)
		h := g + 1
		for h < nl && longs[h].c>>(uint(longs[h].l)-root) == prefix {
			h++
		}
		sub := uint(longs[h-1].l) - root
		off := len(t.e)
		if off+1<<sub > len(t.buf) {
			return false
		}
		t.e = t.buf[:off+1<<sub]
		t.e[bits.Reverse16(uint16(prefix))>>(16-root)] = uint32(off)<<16 | subFlag | uint32(sub)
		for ; g < h; g++ {
			x := longs[g]
			n := uint(x.l) - root
			e := uint32(x.sym)<<16 | uint32(x.l)
			for j := int(bits.Reverse16(uint16(x.c&(1<<n-1))) >> (16 - n)); j < 1<<sub; j += 1 << n {
				t.e[off+j] = e
			}
		}
	}
	return true
}

func fillInvalid(e []uint32) {
	for i := range e {
		e[i] = invalid
	}
}

// refill loads bytes into bits until at least 56 are loaded or the
// input is at its end. The fast path loads 8 bytes at once and counts
// the whole ones that fit: the bits above nb are the next input's and
// are loaded again, the same, by the next refill.
func (z *inflater) refill() {
	z.pos, z.bits, z.nb = refillAt(z.in, z.pos, z.bits, z.nb)
}

func (z *inflater) getBits(n uint) (uint32, error) {
	if z.nb < n {
		z.refill()
		if z.nb < n {
			return 0, errShortInput
		}
	}
	v := uint32(z.bits & (1<<n - 1))
	z.bits >>= n
	z.nb -= n
	return v, nil
}

// refillAt is refill on the bit buffer held in a caller's variables
// (codes keeps it in registers): it loads bytes until at least 56 bits
// are loaded or the input is at its end.
func refillAt(in []byte, pos int, bits uint64, nb uint) (int, uint64, uint) {
	if pos+8 <= len(in) {
		bits |= binary.LittleEndian.Uint64(in[pos:]) << (nb & 63)
		return pos + int(63-nb)>>3, bits, nb | 56
	}
	for nb <= 56 && pos < len(in) {
		bits |= uint64(in[pos]) << (nb & 63)
		pos++
		nb += 8
	}
	return pos, bits, nb
}

// badCode is the error for an invalid or unfinished code: the input may
// have ended inside it (the lookup then read zero bits past the end).
func badCode(n, nb uint, atEnd bool) error {
	if n != invalid || nb < 15 && atEnd {
		return errShortInput
	}
	return errDeflate
}

// codes decodes the codes of a Huffman-coded block into out from w on,
// up to the block's end code, and returns where it stopped writing. It
// is the hot loop of every object read: the bit buffer lives in local
// variables and the table lookups are written out, with one refill per
// symbol pair (48 bits cover a length and a distance with their extra
// bits).
func (z *inflater) codes(out []byte, w int, lit, dist *huffTable) (int, error) {
	in, pos, bits, nb := z.in, z.pos, z.bits, z.nb
	lt := &lit.buf
	dt := &dist.buf
	for {
		if nb < 48 {
			pos, bits, nb = refillAt(in, pos, bits, nb)
		}
		e := lt[bits&(1<<litRoot-1)]
		if e&subFlag != 0 {
			e = lt[(e>>16+uint32(bits>>litRoot)&(1<<(e&31)-1))&(tableSize-1)]
		}
		n := uint(e & 0xff)
		if n > nb {
			return w, badCode(n, nb, pos == len(in))
		}
		bits >>= n & 63
		nb -= n
		s := e >> 16
		if s < 256 {
			if uint(w) >= uint(len(out)) {
				return w, errSizeDiffer
			}
			out[w] = byte(s)
			w++
			continue
		}
		if s == 256 {
			z.pos, z.bits, z.nb = pos, bits, nb
			return w, nil
		}
		s -= 257
		if s >= uint32(len(lengthBase)) {
			return w, errDeflate
		}
		x := uint(lengthExtra[s])
		if x > nb {
			return w, errShortInput
		}
		length := int(lengthBase[s]) + int(bits&(1<<(x&63)-1))
		bits >>= x & 63
		nb -= x
		e = dt[bits&(1<<distRoot-1)]
		if e&subFlag != 0 {
			e = dt[(e>>16+uint32(bits>>distRoot)&(1<<(e&31)-1))&(tableSize-1)]
		}
		n = uint(e & 0xff)
		if n > nb {
			return w, badCode(n, nb, pos == len(in))
		}
		bits >>= n & 63
		nb -= n
		ds := e >> 16
		if ds >= uint32(len(distBase)) {
			return w, errDeflate
		}
		x = uint(distExtra[ds])
		if x > nb {
			return w, errShortInput
		}
		d := int(distBase[ds]) + int(bits&(1<<(x&63)-1))
		bits >>= x & 63
		nb -= x
		if d > w {
			return w, errDeflate
		}
		if length > len(out)-w {
			return w, errSizeDiffer
		}
		if d >= length {
			copy(out[w:w+length], out[w-d:])
		} else {
			for k := w; k < w+length; k++ {
				out[k] = out[k-d]
			}
		}
		w += length
	}
}

var (
	lengthBase  = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lengthExtra = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase    = [30]uint32{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra   = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	clOrder     = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}

	fixedOnce          sync.Once
	fixedLit, fixedDst *huffTable
)

func fixedTables() (*huffTable, *huffTable) {
	fixedOnce.Do(func() {
		var l [maxLit + maxDist]uint8
		for i := range maxLit {
			switch {
			case i < 144:
				l[i] = 8
			case i < 256:
				l[i] = 9
			case i < 280:
				l[i] = 7
			default:
				l[i] = 8
			}
		}
		for i := range maxDist {
			l[maxLit+i] = 5
		}
		fixedLit, fixedDst = new(huffTable), new(huffTable)
		fixedLit.build(l[:maxLit], litRoot, false, false)
		fixedDst.build(l[maxLit:], distRoot, false, false)
	})
	return fixedLit, fixedDst
}

var inflaterPool = sync.Pool{New: func() any { return new(inflater) }}

// inflateTo decodes the zlib stream at the start of in into out, which
// must come out exactly full. It returns how many bytes of in the stream
// took (trailer included).
func inflateTo(out, in []byte) (int, error) {
	z := inflaterPool.Get().(*inflater)
	n, err := z.inflate(out, in)
	z.in = nil
	inflaterPool.Put(z)
	return n, err
}

func (z *inflater) inflate(out, in []byte) (int, error) {
	if len(in) < 2 {
		return 0, errShortInput
	}
	cmf, flg := in[0], in[1]
	if cmf&0x0f != 8 || cmf>>4 > 7 || (uint(cmf)<<8|uint(flg))%31 != 0 || flg&0x20 != 0 {
		return 0, errZlibHeader
	}
	z.in, z.pos, z.bits, z.nb = in, 2, 0, 0
	w := 0
	for final := uint32(0); final == 0; {
		hdr, err := z.getBits(3)
		if err != nil {
			return 0, err
		}
		final = hdr & 1
		var lit, dist *huffTable
		switch hdr >> 1 {
		case 0: // stored
			z.bits, z.pos, z.nb = 0, z.pos-int(z.nb>>3), 0 // to the byte boundary
			if z.pos+4 > len(in) {
				return 0, errShortInput
			}
			n := int(binary.LittleEndian.Uint16(in[z.pos:]))
			if uint16(n) != ^binary.LittleEndian.Uint16(in[z.pos+2:]) {
				return 0, errDeflate
			}
			z.pos += 4
			if z.pos+n > len(in) {
				return 0, errShortInput
			}
			if w+n > len(out) {
				return 0, errSizeDiffer
			}
			copy(out[w:], in[z.pos:z.pos+n])
			w += n
			z.pos += n
			continue
		case 1:
			lit, dist = fixedTables()
		case 2:
			if err := z.readTables(); err != nil {
				return 0, err
			}
			lit, dist = &z.lit, &z.dist
		default:
			return 0, errDeflate
		}
		if w, err = z.codes(out, w, lit, dist); err != nil {
			return 0, err
		}
	}
	if w != len(out) {
		return 0, errSizeDiffer
	}
	// The Adler-32 of the output follows at the next byte boundary.
	p := z.pos - int(z.nb>>3)
	if p+4 > len(in) {
		return 0, errShortInput
	}
	if binary.BigEndian.Uint32(in[p:]) != adler32.Checksum(out) {
		return 0, errZlibSum
	}
	return p + 4, nil
}

// readTables reads a dynamic block's code lengths and builds its tables.
func (z *inflater) readTables() error {
	h, err := z.getBits(14)
	if err != nil {
		return err
	}
	nlit, ndist, nclen := int(h&31)+257, int(h>>5&31)+1, int(h>>10)+4
	if nlit > 286 || ndist > 30 {
		return errDeflate
	}
	var cl [19]uint8
	for i := range nclen {
		v, err := z.getBits(3)
		if err != nil {
			return err
		}
		cl[clOrder[i]] = uint8(v)
	}
	if !z.cl.build(cl[:], clRoot, false, true) {
		return errDeflate
	}
	// The code lengths, with the bit buffer in local variables as in
	// codes (a code length code is at most 7 bits: the table has one level).
	lens := z.lens[:nlit+ndist]
	in, pos, bits, nb := z.in, z.pos, z.bits, z.nb
	ct, cmask := &z.cl.buf, z.cl.mask&(tableSize-1)
	for n := 0; n < len(lens); {
		if nb < 14 {
			pos, bits, nb = refillAt(in, pos, bits, nb)
		}
		e := ct[bits&cmask]
		l := uint(e & 0xff)
		if l > nb {
			return badCode(l, nb, pos == len(in))
		}
		bits >>= l & 63
		nb -= l
		s := e >> 16
		if s < 16 {
			lens[n] = uint8(s)
			n++
			continue
		}
		var x uint
		var rep int
		var val uint8
		switch s {
		case 16:
			if n == 0 {
				return errDeflate
			}
			val, x, rep = lens[n-1], 2, 3
		case 17:
			x, rep = 3, 3
		default:
			x, rep = 7, 11
		}
		if x > nb {
			return errShortInput
		}
		rep += int(bits & (1<<x - 1))
		bits >>= x
		nb -= x
		if rep > len(lens)-n {
			return errDeflate
		}
		for end := n + rep; n < end; n++ {
			lens[n] = val
		}
	}
	z.pos, z.bits, z.nb = pos, bits, nb
	if lens[256] == 0 {
		return errDeflate // no end-of-block code
	}
	if !z.lit.build(lens[:nlit], litRoot, true, false) || !z.dist.build(lens[nlit:], distRoot, true, false) {
		return errDeflate
	}
	return nil
}
