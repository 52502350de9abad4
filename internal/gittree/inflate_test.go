package gittree

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// zlibRef decodes with compress/zlib to the end of the stream (checksum
// checked), the reference inflateTo is compared with.
func zlibRef(in []byte) ([]byte, error) {
	zr, err := zlib.NewReader(bytes.NewReader(in))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(zr)
}

func zlibBytes(t testing.TB, data []byte, level int) []byte {
	var b bytes.Buffer
	w, err := zlib.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// testInputs: what objects look like (commits, source text, trees of
// binary hashes), random bytes (stored blocks), runs (long matches,
// overlapping copies), sizes from empty to past 64 KB (several blocks).
func testInputs() [][]byte {
	rng := rand.New(rand.NewPCG(1, 2))
	var ins [][]byte
	ins = append(ins, nil, []byte("x"), []byte("tree 0123\n"))
	var commit strings.Builder
	fmt.Fprintf(&commit, "tree %040x\nparent %040x\nauthor A U Thor <a@example.org> 1700000000 +0530\ncommitter C O Mitter <c@example.org> 1700000001 -0800\n\n", 7, 9)
	commit.WriteString("net: fix a thing\n\nA body line that says why.\n\nSigned-off-by: A U Thor <a@example.org>\nLink: https://lore.kernel.org/r/x@example.org\n")
	ins = append(ins, []byte(commit.String()))
	var src strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&src, "static int f%d(struct device *dev) { return dev->id * %d; }\n", i%97, rng.IntN(1000))
	}
	ins = append(ins, []byte(src.String()), []byte(src.String()[:70000]), []byte(src.String()[:300]))
	tree := make([]byte, 0, 30000)
	for i := range 1000 {
		tree = fmt.Appendf(tree, "100644 file%d.c\x00", i)
		for range 20 {
			tree = append(tree, byte(rng.IntN(256)))
		}
	}
	ins = append(ins, tree)
	for _, n := range []int{1, 100, 4000, 70000, 200000} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		ins = append(ins, b)
	}
	ins = append(ins, bytes.Repeat([]byte("a"), 100000), bytes.Repeat([]byte("ab"), 1000), bytes.Repeat([]byte{0, 1, 2}, 33333))
	// A small alphabet with a skewed distribution: long Huffman codes
	// (subtables of the root table).
	sk := make([]byte, 50000)
	for i := range sk {
		x := rng.ExpFloat64() * 3
		sk[i] = byte(min(x, 255))
	}
	ins = append(ins, sk)
	return ins
}

// TestInflateLikeZlib decodes what compress/zlib writes at every level
// (stored, fixed and dynamic blocks, Huffman-only) like compress/zlib,
// reports how many input bytes the stream took, and refuses a stream
// that decodes to another size than asked.
func TestInflateLikeZlib(t *testing.T) {
	for i, data := range testInputs() {
		for _, level := range []int{zlib.NoCompression, zlib.BestSpeed, 2, 5, zlib.DefaultCompression, zlib.BestCompression, zlib.HuffmanOnly} {
			z := zlibBytes(t, data, level)
			// Trailing bytes after the stream (the next object in a pack).
			in := append(append([]byte{}, z...), 0xde, 0xad, 0xbe, 0xef)
			out := make([]byte, len(data))
			n, err := inflateTo(out, in)
			if err != nil || n != len(z) || !bytes.Equal(out, data) {
				t.Fatalf("input %d (%d bytes), level %d: took %d of %d bytes, err %v, same output %v", i, len(data), level, n, len(z), err, bytes.Equal(out, data))
			}
			if len(data) > 0 {
				if _, err := inflateTo(make([]byte, len(data)-1), in); !errors.Is(err, errSizeDiffer) {
					t.Errorf("input %d level %d: one byte short: %v, want errSizeDiffer", i, level, err)
				}
			}
			if _, err := inflateTo(make([]byte, len(data)+1), in); !errors.Is(err, errSizeDiffer) {
				t.Errorf("input %d level %d: one byte long: %v, want errSizeDiffer", i, level, err)
			}
		}
	}
}

// TestInflateShortInput: every truncation of a stream asks for more
// input (errShortInput), never decodes, never panics.
func TestInflateShortInput(t *testing.T) {
	for i, data := range testInputs() {
		if len(data) > 5000 {
			continue
		}
		for _, level := range []int{zlib.NoCompression, zlib.BestSpeed, zlib.DefaultCompression, zlib.HuffmanOnly} {
			z := zlibBytes(t, data, level)
			for cut := range len(z) {
				out := make([]byte, len(data))
				if _, err := inflateTo(out, z[:cut]); !errors.Is(err, errShortInput) {
					t.Fatalf("input %d level %d cut at %d of %d: %v, want errShortInput", i, level, cut, len(z), err)
				}
			}
		}
	}
}

// TestInflateCorrupt: a changed byte or bit is refused where
// compress/zlib refuses it (or decodes to another size) and decodes as
// compress/zlib decodes it where that still makes a valid stream; never
// panics.
func TestInflateCorrupt(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	type stream struct{ data, z []byte }
	var streams []stream
	for _, data := range testInputs() {
		data = data[:min(len(data), 5000)]
		for _, level := range []int{zlib.BestSpeed, zlib.DefaultCompression, zlib.HuffmanOnly} {
			streams = append(streams, stream{data, zlibBytes(t, data, level)})
		}
	}
	for range 20000 {
		s := streams[rng.IntN(len(streams))]
		z := bytes.Clone(s.z)
		z[rng.IntN(len(z))] ^= byte(1 << rng.IntN(8))
		checkAgainstZlib(t, s.data, z)
	}
}

// checkAgainstZlib: inflateTo decodes z to len(data) bytes if and only
// if compress/zlib decodes it to that many, and to the same bytes.
func checkAgainstZlib(t *testing.T, data, z []byte) {
	t.Helper()
	out := make([]byte, len(data))
	_, err := inflateTo(out, z)
	want, werr := zlibRef(z)
	if err == nil && (werr != nil || !bytes.Equal(out, want)) {
		t.Fatalf("a stream compress/zlib refuses (%v) or decodes otherwise was decoded: %q", werr, z)
	}
	if werr == nil && len(want) == len(data) && (err != nil || !bytes.Equal(out, want)) {
		t.Fatalf("a stream compress/zlib decodes to %d bytes was refused (%v) or decoded otherwise: %q", len(data), err, z)
	}
}

// FuzzInflate: whatever inflateTo decodes, compress/zlib decodes the
// same; and whatever compress/zlib decodes to size bytes, inflateTo
// decodes the same at that size.
func FuzzInflate(f *testing.F) {
	for _, d := range testInputs()[:6] {
		f.Add(zlibBytes(f, d, zlib.DefaultCompression), len(d))
		f.Add(zlibBytes(f, d, zlib.NoCompression), len(d))
	}
	f.Fuzz(func(t *testing.T, z []byte, size int) {
		if size < 0 || size > 1<<20 {
			return
		}
		checkAgainstZlib(t, make([]byte, size), z)
	})
}

// bitWriter writes a deflate stream: fields from their lowest bit,
// Huffman codes from their highest.
type bitWriter struct {
	b  []byte
	nb uint
}

func (w *bitWriter) bits(v uint32, n uint) {
	for i := uint(0); i < n; i++ {
		if w.nb%8 == 0 {
			w.b = append(w.b, 0)
		}
		w.b[len(w.b)-1] |= byte(v>>i&1) << (w.nb % 8)
		w.nb++
	}
}

func (w *bitWriter) code(c uint32, n uint) {
	for i := int(n) - 1; i >= 0; i-- {
		w.bits(c>>uint(i)&1, 1)
	}
}

// canonical gives the canonical Huffman codes of these lengths (RFC 1951 3.2.2).
func canonical(lens []uint8) []uint32 {
	var count [16]uint32
	for _, l := range lens {
		count[l]++
	}
	count[0] = 0
	var next [16]uint32
	c := uint32(0)
	for l := 1; l < 16; l++ {
		c = (c + count[l-1]) << 1
		next[l] = c
	}
	codes := make([]uint32, len(lens))
	for s, l := range lens {
		if l != 0 {
			codes[s] = next[l]
			next[l]++
		}
	}
	return codes
}

// fixedLitCode is symbol s's code in a fixed Huffman block.
func fixedLitCode(s int) (uint32, uint) {
	switch {
	case s < 144:
		return uint32(0x30 + s), 8
	case s < 256:
		return uint32(0x190 + s - 144), 9
	case s < 280:
		return uint32(s - 256), 7
	default:
		return uint32(0xc0 + s - 280), 8
	}
}

// dynamicHeader writes a final dynamic block's header (BFINAL, BTYPE 2)
// with these literal/length and distance code lengths, each written as
// a code length symbol of a complete code length code (0-13 in 4 bits,
// 14-17 in 5); lead, if any, are code length symbols written first
// (16: repeat with 2 extra bits of 0). It returns the codes.
func dynamicHeader(w *bitWriter, nlit, ndist int, lit, dist map[int]uint8, lead ...int) (litCodes, distCodes []uint32, litLens []uint8) {
	w.bits(1, 1)
	w.bits(2, 2)
	w.bits(uint32(nlit-257), 5)
	w.bits(uint32(ndist-1), 5)
	w.bits(19-4, 4)
	var cl [19]uint8
	for s := range 14 {
		cl[s] = 4
	}
	cl[14], cl[15], cl[16], cl[17] = 5, 5, 5, 5
	for _, s := range clOrder {
		w.bits(uint32(cl[s]), 3)
	}
	clCodes := canonical(cl[:])
	for _, s := range lead {
		w.code(clCodes[s], uint(cl[s]))
		if s == 16 {
			w.bits(0, 2)
		}
	}
	lens := make([]uint8, nlit+ndist)
	for s, l := range lit {
		lens[s] = l
	}
	for s, l := range dist {
		lens[nlit+s] = l
	}
	for _, l := range lens {
		w.code(clCodes[l], uint(cl[l]))
	}
	return canonical(lens[:nlit]), canonical(lens[nlit:]), lens[:nlit]
}

// TestInflateHostile: streams made by hand, each with one flaw that
// RFC 1951 or zlib refuses, are refused by inflateTo as corrupt
// (errDeflate, not a request for more input), and by compress/zlib.
func TestInflateHostile(t *testing.T) {
	fixed := func(syms ...int) []byte { // a final fixed block of these symbols (literal, length, or -1-dist for a distance code)
		w := &bitWriter{}
		w.bits(1, 1)
		w.bits(1, 2)
		for _, s := range syms {
			if s < 0 {
				w.code(uint32(-1-s), 5)
				continue
			}
			w.code(fixedLitCode(s))
		}
		return w.b
	}
	streams := map[string][]byte{
		"distance past the output": fixed('a', 257, -1-1, 256), // length 3 at distance 2 after one byte
		"distance at the start":    fixed(257, -1-0, 256),
		"literal symbol 286":       fixed('a', 286, 256),
		"literal symbol 287":       fixed('a', 287, 256),
		"distance symbol 30":       fixed('a', 'b', 257, -1-30, 256),
		"distance symbol 31":       fixed('a', 'b', 257, -1-31, 256),
	}
	// A final dynamic block of "aa" (where the codes have 'a' and 256)
	// with these code lengths, nlit and ndist as few as they allow or
	// more.
	dynN := func(nlit, ndist int, lit, dist map[int]uint8, lead ...int) []byte {
		w := &bitWriter{}
		for d := range dist {
			ndist = max(ndist, d+1)
		}
		codes, _, lens := dynamicHeader(w, nlit, ndist, lit, dist, lead...)
		for _, s := range []int{'a', 'a', 256} {
			if lens[s] != 0 {
				w.code(codes[s], uint(lens[s]))
			}
		}
		return w.b
	}
	dyn := func(lit, dist map[int]uint8, lead ...int) []byte { return dynN(257, 1, lit, dist, lead...) }
	all8 := map[int]uint8{}
	for s := range 257 {
		all8[s] = 8 // 257 codes of 8 bits: one too many
	}
	streams["over-subscribed literal code"] = dyn(all8, map[int]uint8{0: 1})
	streams["over-subscribed distance code"] = dyn(map[int]uint8{'a': 1, 256: 1}, map[int]uint8{0: 1, 1: 1, 2: 1})
	streams["incomplete literal code of two codes"] = dyn(map[int]uint8{'a': 2, 256: 2}, map[int]uint8{0: 1})
	streams["incomplete distance code of two codes"] = dyn(map[int]uint8{'a': 1, 256: 1}, map[int]uint8{0: 2, 1: 2})
	streams["no end-of-block code"] = dyn(map[int]uint8{'a': 1, 'b': 1}, map[int]uint8{0: 1})
	streams["repeat code 16 first"] = dyn(map[int]uint8{'a': 1, 256: 1}, map[int]uint8{0: 1}, 16)
	{
		// The code length code over-subscribed: three codes of 1 bit.
		w := &bitWriter{}
		w.bits(1, 1)
		w.bits(2, 2)
		w.bits(0, 5)
		w.bits(0, 5)
		w.bits(0, 4) // 4 code length codes: 16, 17, 18, 0
		for _, l := range []uint32{1, 1, 1, 0} {
			w.bits(l, 3)
		}
		w.bits(0, 16)
		streams["over-subscribed code length code"] = w.b
	}
	// Sound but for the count of code lengths (those past the limit are 0).
	for _, nlit := range []int{287, 288} {
		streams[fmt.Sprint(nlit, " literal/length codes")] = dynN(nlit, 1, map[int]uint8{'a': 1, 256: 1}, map[int]uint8{0: 1})
	}
	for _, ndist := range []int{31, 32} {
		streams[fmt.Sprint(ndist, " distance codes")] = dynN(257, ndist, map[int]uint8{'a': 1, 256: 1}, map[int]uint8{0: 1})
	}
	for name, raw := range streams {
		// zlib header, the stream, a checksum (of "aa", what the sound
		// ones would decode to) and bytes after: nothing is short.
		z := append([]byte{0x78, 0x9c}, raw...)
		s := adler32.Checksum([]byte("aa"))
		z = append(z, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
		z = append(z, make([]byte, 16)...)
		for _, size := range []int{2, 3, 4, 16} {
			if _, err := inflateTo(make([]byte, size), z); !errors.Is(err, errDeflate) {
				t.Errorf("%s, size %d: %v, want errDeflate", name, size, err)
			}
		}
		if out, err := zlibRef(z); err == nil {
			t.Errorf("%s: compress/zlib decodes it (%q): the stream is not what its name says", name, out)
		}
	}
	// The writer itself: the same streams without their flaw decode.
	sound := []struct {
		name string
		raw  []byte
		want string
	}{
		{"fixed", fixed('a', 'a', 256), "aa"},
		{"dynamic", dyn(map[int]uint8{'a': 1, 256: 1}, map[int]uint8{0: 1}), "aa"},
		{"dynamic, 286 and 30 codes", dynN(286, 30, map[int]uint8{'a': 1, 256: 1}, map[int]uint8{0: 1}), "aa"},
		{"copy", fixed('a', 257, -1-0, 256), "aaaa"}, // "a", then 3 at distance 1
	}
	for _, c := range sound {
		name, want := c.name, []byte(c.want)
		z := append([]byte{0x78, 0x9c}, c.raw...)
		s := adler32.Checksum(want)
		z = append(z, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
		out := make([]byte, len(want))
		if _, err := inflateTo(out, z); err != nil || !bytes.Equal(out, want) {
			t.Errorf("sound %s stream: %q, %v", name, out, err)
		}
		if got, err := zlibRef(z); err != nil || !bytes.Equal(got, want) {
			t.Errorf("sound %s stream, compress/zlib: %q, %v", name, got, err)
		}
	}
}

// TestInflateGitsZlib decodes the loose objects git wrote (C zlib's
// streams) like compress/zlib.
func TestInflateGitsZlib(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	for i, data := range testInputs() {
		if len(data) == 0 {
			continue
		}
		p := filepath.Join(dir, fmt.Sprint("f", i))
		os.WriteFile(p, data, 0o644)
		if out, err := exec.Command("git", "-C", dir, "-c", fmt.Sprint("core.compression=", i%10), "hash-object", "-w", p).CombinedOutput(); err != nil {
			t.Fatalf("git hash-object: %v %s", err, out)
		}
	}
	objs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "??", "*"))
	if len(objs) < 10 {
		t.Fatalf("%d loose objects", len(objs))
	}
	for _, p := range objs {
		z, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		want, err := zlibRef(z)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]byte, len(want))
		if n, err := inflateTo(out, z); err != nil || n != len(z) || !bytes.Equal(out, want) {
			t.Errorf("%s: took %d of %d bytes, %v, same %v", p, n, len(z), err, bytes.Equal(out, want))
		}
	}
}

// TestInflateRawFlate covers the block layouts compress/flate's writer
// makes with several flushes (empty stored blocks, blocks ending
// mid-byte), wrapped in a zlib header and trailer by hand.
func TestInflateRawFlate(t *testing.T) {
	data := testInputs()[4]
	var raw bytes.Buffer
	fw, _ := flate.NewWriter(&raw, 6)
	for off := 0; off < len(data); off += 7001 {
		fw.Write(data[off:min(off+7001, len(data))])
		fw.Flush()
	}
	fw.Close()
	z := append([]byte{0x78, 0x9c}, raw.Bytes()...)
	s := adler32.Checksum(data)
	z = append(z, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
	out := make([]byte, len(data))
	if n, err := inflateTo(out, z); err != nil || n != len(z) || !bytes.Equal(out, data) {
		t.Fatalf("flushed stream: %d of %d bytes, %v", n, len(z), err)
	}
	z[len(z)-1] ^= 1
	if _, err := inflateTo(out, z); !errors.Is(err, errZlibSum) {
		t.Errorf("bad checksum: %v", err)
	}
}

// cpuPerOp reports the process's CPU time (user + system) per op beside
// ns/op, which on a shared machine counts the time others ran: call it
// before the loop and its result after.
func cpuPerOp(b *testing.B) func() {
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	start := cpu()
	return func() {
		b.ReportMetric(float64(cpu()-start)/float64(b.N), "cpu-ns/op")
	}
}

// BenchmarkInflateCommit inflates a commit as git compressed it
// (testdata/commit.zlib: the loose object git hash-object wrote for a
// commit of bench/bigtree.sh's generated history).
func BenchmarkInflateCommit(b *testing.B) {
	z, err := os.ReadFile("testdata/commit.zlib")
	if err != nil {
		b.Fatal(err)
	}
	data, err := zlibRef(z)
	if err != nil {
		b.Fatal(err)
	}
	out := make([]byte, len(data))
	b.Run("inflateTo", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := inflateTo(out, z); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("compress/zlib", func(b *testing.B) {
		defer cpuPerOp(b)()
		for b.Loop() {
			if _, err := inflate(bytes.NewReader(z), uint64(len(data))); err != nil {
				b.Fatal(err)
			}
		}
	})
}
