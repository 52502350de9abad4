package gittree

import (
	"bytes"
	"crypto/sha1"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/idxfile"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestPackIndexLargeOffsets writes a version 2 index with go-git's encoder
// (offsets past 2 GiB go to the large-offset table) and finds every object
// in it, and none that is not there.
func TestPackIndexLargeOffsets(t *testing.T) {
	w := new(idxfile.Writer)
	w.OnHeader(3000)
	var hashes []plumbing.Hash
	for i := 0; i < 3000; i++ {
		h := plumbing.Hash(sha1.Sum([]byte(fmt.Sprint("object ", i))))
		if i%60 == 0 {
			copy(h[:], "\x5a\x00\x01\x02\x03\x04\x05\x06") // names alike in their first 8 bytes
		}
		off := int64(12 + i*1000)
		if i%3 == 0 {
			off += 5 << 30 // a pack of several GB
		}
		w.Add(h, uint64(off), uint32(i))
		hashes = append(hashes, h)
	}
	w.OnFooter(plumbing.Hash(sha1.Sum([]byte("pack"))))
	idx, err := w.Index()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := idxfile.NewEncoder(&buf).Encode(idx); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "pack-x.idx")
	os.WriteFile(p, buf.Bytes(), 0o644)
	x, err := openPackIndex(p)
	if err != nil {
		t.Fatal(err)
	}
	defer x.close()
	for i, h := range hashes {
		want, _ := idx.FindOffset(h)
		got, ok := x.find(h)
		if !ok || got != want {
			t.Fatalf("object %d %s: offset %d, %v; go-git's index says %d", i, h, got, ok, want)
		}
	}
	absent := plumbing.Hash(sha1.Sum([]byte("absent")))
	if _, ok := x.find(absent); ok {
		t.Error("found an object that is not in the index")
	}
	copy(absent[:], hashes[0][:8])
	if _, ok := x.find(absent); ok {
		t.Error("found an object that is not in the index (first 8 bytes of one that is)")
	}
	// Prefix search: every object whose name starts with the first two
	// bytes of hashes[7].
	want := 0
	for _, h := range hashes {
		if bytes.HasPrefix(h[:], hashes[7][:2]) {
			want++
		}
	}
	if got := x.withPrefix(hashes[7][:2], nil); len(got) != want || want == 0 {
		t.Errorf("withPrefix: %d hashes, want %d", len(got), want)
	}
	// A truncated index is refused with its name.
	os.WriteFile(p, buf.Bytes()[:buf.Len()/2], 0o644)
	if _, err := openPackIndex(p); err == nil || !strings.Contains(err.Error(), p) {
		t.Errorf("truncated index: %v", err)
	}
}

func gitT(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=A", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=C", "GIT_COMMITTER_EMAIL=c@example.org")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestStorageReadsLikeGit reads every object of a repository with packed
// (delta-compressed) and loose objects through Storage and compares type
// and content with git cat-file; then a pack written after the storage
// was opened is found, and abbreviated hashes resolve.
func TestStorageReadsLikeGit(t *testing.T) {
	dir := t.TempDir()
	gitT(t, dir, "init", "-q")
	var body strings.Builder
	for i := 0; i < 400; i++ {
		fmt.Fprintf(&body, "line %d of a file that deltas well\n", i)
	}
	// Incompressible blobs: one whose stream is longer than inflate's
	// first guess at it, one larger than inMemoryMax (streamed).
	rng := rand.New(rand.NewPCG(5, 6))
	for name, n := range map[string]int{"random-100k": 100 << 10, "random-big": inMemoryMax + 300<<10} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		os.WriteFile(filepath.Join(dir, name), b, 0o644)
	}
	for i := 0; i < 6; i++ {
		os.WriteFile(filepath.Join(dir, "f.txt"), []byte(body.String()+strings.Repeat("x\n", i)), 0o644)
		os.MkdirAll(filepath.Join(dir, "sub", "dir"), 0o755)
		os.WriteFile(filepath.Join(dir, "sub", "dir", fmt.Sprint(i)), []byte(fmt.Sprint(i)), 0o644)
		gitT(t, dir, "add", "-A")
		gitT(t, dir, "commit", "-q", "-m", fmt.Sprint("commit ", i))
		if i == 3 {
			gitT(t, dir, "repack", "-adq", "--depth=10")
			gitT(t, dir, "tag", "-a", "-m", "tag", "v1")
		}
	}
	r, st, _, err := Open(dir, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Every object, type and content, from one git cat-file.
	type gobj struct {
		typ  string
		data []byte
	}
	want := map[string]gobj{}
	out, err := exec.Command("git", "-C", dir, "cat-file", "--batch-all-objects", "--batch").Output()
	if err != nil {
		t.Fatal(err)
	}
	for len(out) > 0 {
		hdr, rest, _ := bytes.Cut(out, []byte{'\n'})
		var name, typ string
		var size int
		if _, err := fmt.Sscan(string(hdr), &name, &typ, &size); err != nil {
			t.Fatalf("cat-file header %q: %v", hdr, err)
		}
		want[name] = gobj{typ, rest[:size]}
		out = rest[size+1:]
	}
	if len(want) < 30 {
		t.Fatalf("only %d objects", len(want))
	}
	check := func() {
		for hs, w := range want {
			h := plumbing.NewHash(hs)
			o, err := st.EncodedObject(plumbing.AnyObject, h)
			if err != nil {
				t.Fatalf("%s: %v", hs, err)
			}
			if o.Type().String() != w.typ {
				t.Errorf("%s: type %s, git: %s", hs, o.Type(), w.typ)
			}
			rd, _ := o.Reader()
			var b bytes.Buffer
			b.ReadFrom(rd)
			if !bytes.Equal(b.Bytes(), w.data) {
				t.Errorf("%s: content differs from git cat-file", hs)
			}
			if err := st.HasEncodedObject(h); err != nil {
				t.Errorf("HasEncodedObject(%s): %v", hs, err)
			}
		}
	}
	check()
	if err := st.HasEncodedObject(plumbing.NewHash(strings.Repeat("ab", 20))); err != plumbing.ErrObjectNotFound {
		t.Errorf("HasEncodedObject(absent) = %v", err)
	}
	// A repack after opening: the loose objects move into a new pack and
	// the old pack goes; reads still work (new packs are looked for on a
	// miss; the removed pack's file stays readable while open).
	gitT(t, dir, "repack", "-adq")
	check()
	// Abbreviated hashes: Storage answers HashesWithPrefix.
	head := gitT(t, dir, "rev-parse", "HEAD")
	h, err := r.ResolveRevision(plumbing.Revision(head[:9]))
	if err != nil || h.String() != head {
		t.Errorf("ResolveRevision(%s) = %v, %v", head[:9], h, err)
	}
	// A ref named by three hex digits of another commit's name is the
	// ref, as in git (no abbreviation is shorter than 4 digits).
	gitT(t, dir, "tag", head[:3], "HEAD~2")
	h, err = r.ResolveRevision(plumbing.Revision(head[:3]))
	if want := gitT(t, dir, "rev-parse", head[:3]); err != nil || h.String() != want {
		t.Errorf("ResolveRevision(%s) = %v, %v; git: %s", head[:3], h, err, want)
	}
	c, err := object.GetCommit(st, plumbing.NewHash(head))
	if err != nil || c.Message != "commit 5\n" {
		t.Fatalf("GetCommit: %v %v", c, err)
	}
	tagged, err := r.ResolveRevision("v1")
	if err != nil || tagged.String() != gitT(t, dir, "rev-parse", "v1^{commit}") {
		t.Errorf("ResolveRevision(v1) = %v, %v", tagged, err)
	}
	var names []string
	for _, p := range st.objs.packs {
		names = append(names, fmt.Sprint(p.idx.n))
	}
	sort.Strings(names)
	t.Logf("packs opened (objects): %v", names)
}
