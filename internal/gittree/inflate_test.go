package gittree

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"errors"
	"fmt"
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

// TestInflateCorrupt: a changed byte or bit is refused (or, where the
// change still makes a valid stream, decodes as compress/zlib decodes
// it), never panics.
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

func checkAgainstZlib(t *testing.T, data, z []byte) {
	t.Helper()
	out := make([]byte, len(data))
	_, err := inflateTo(out, z)
	if err != nil {
		return
	}
	want, werr := zlibRef(z)
	if werr != nil || !bytes.Equal(out, want) {
		t.Fatalf("a stream compress/zlib refuses (%v) or decodes otherwise was decoded: %q", werr, z)
	}
}

// FuzzInflate: whatever inflateTo decodes, compress/zlib decodes the
// same (zlib is the stricter of the two on incomplete codes).
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
	s := adlerOf(data)
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

func adlerOf(b []byte) uint32 {
	const mod = 65521
	a, s := uint32(1), uint32(0)
	for _, c := range b {
		a = (a + uint32(c)) % mod
		s = (s + a) % mod
	}
	return s<<16 | a
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
