package linuxtree

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/digest"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/internal/tar2git"
)

// Source is one release to import: where its tarball comes from and
// what the commit will say about it.
type Source struct {
	Tag     string // v7.2.13
	Version string // 7.2.13, Debian spelling (orders the history)
	Title   string // "Linux 7.2.13 (Debian linux-source-7.2 7.2.13-1)"
	Origin  string // "debian linux-source-7.2 7.2.13-1", "tarball linux-7.2.13.tar.xz"
	SHA256  string // of the .deb or tarball file

	file   string // the .deb or tarball
	member string // inside a .deb: the tarball's path in its data archive
	size   int64  // compressed bytes to read (progress)
}

// DebianSource is the tarball of a verified linux-source-X.Y package
// (internal/debian's Download or Verify), /usr/src/linux-source-X.Y.tar.xz
// inside it, tagged with its upstream version.
func DebianSource(deb string, p debian.Package) (*Source, error) {
	series := strings.TrimPrefix(p.Name, "linux-source-")
	if series == p.Name || series == "" {
		return nil, fail.Inputf("%s is %s, not a linux-source-X.Y package", deb, p.Name)
	}
	v := debian.Upstream(p.Version)
	if _, err := TagVersion(VersionTag(v)); err != nil {
		return nil, fail.Inputf("%s %s: upstream version %q is not a kernel release", p.Name, p.Version, v)
	}
	fi, err := os.Stat(deb)
	if err != nil {
		return nil, fail.Input(err)
	}
	return &Source{
		Tag: VersionTag(v), Version: v,
		Title:  fmt.Sprintf("Linux %s (Debian %s %s)", strings.ReplaceAll(v, "~", "-"), p.Name, p.Version),
		Origin: fmt.Sprintf("debian %s %s", p.Name, p.Version), SHA256: p.SHA256,
		file: deb, member: "./usr/src/linux-source-" + series + ".tar.xz", size: fi.Size(),
	}, nil
}

// TarballSource is a kernel.org-style tarball (.tar.xz, .tar.gz, .tar)
// imported under tag (vX.Y.Z).
func TarballSource(file, tag string) (*Source, error) {
	v, err := TagVersion(tag)
	if err != nil {
		return nil, err
	}
	if decompressor(file) == "?" {
		return nil, fail.Inputf("%s: not a .tar, .tar.gz, .tgz, .tar.xz or .tar.zst file", file)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fail.Input(err)
	}
	sum, err := digest.File(file)
	if err != nil {
		return nil, fail.Input(err)
	}
	return &Source{
		Tag: tag, Version: v, Title: fmt.Sprintf("Linux %s (%s)", strings.TrimPrefix(tag, "v"), filepath.Base(file)),
		Origin: "tarball " + filepath.Base(file), SHA256: sum, file: file, size: fi.Size(),
	}, nil
}

func decompressor(file string) string {
	switch {
	case strings.HasSuffix(file, ".tar.xz"), strings.HasSuffix(file, ".txz"):
		return "xz"
	case strings.HasSuffix(file, ".tar.gz"), strings.HasSuffix(file, ".tgz"):
		return "gzip"
	case strings.HasSuffix(file, ".tar.zst"):
		return "zstd"
	case strings.HasSuffix(file, ".tar"):
		return ""
	}
	return "?"
}

// counter counts the compressed bytes read, for progress.
type counter struct {
	r io.Reader
	n atomic.Int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// compressed opens the compressed tarball: the file itself, or the
// member of a .deb's data archive (read through dpkg-deb --fsys-tarfile).
func (s *Source) compressed(ctx context.Context) (io.Reader, func() error, error) {
	f, err := os.Open(s.file)
	if err != nil {
		return nil, nil, fail.Input(err)
	}
	if s.member == "" {
		return f, f.Close, nil
	}
	f.Close()
	cmd := exec.CommandContext(ctx, "dpkg-deb", "--fsys-tarfile", s.file)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fail.Infra(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fail.Infraf("dpkg-deb: %v", err)
	}
	done := func() error {
		io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			return fail.Inputf("%s: dpkg-deb --fsys-tarfile: %v: %s", s.file, err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}
	tr := tar.NewReader(out)
	for {
		h, err := tr.Next()
		if err != nil {
			done()
			if errors.Is(err, io.EOF) {
				return nil, nil, fail.Inputf("%s holds no %s", s.file, s.member)
			}
			return nil, nil, fail.Inputf("%s: reading its data archive: %v", s.file, err)
		}
		if h.Name == s.member || "./"+h.Name == s.member {
			s.size = h.Size
			return tr, done, nil
		}
	}
}

// convert streams the tarball through the decompressor and tar2git into
// a fast-import of q (branch "import").
func (s *Source) convert(parent context.Context, q string, logf func(string, ...any)) (tar2git.Result, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	raw, closeRaw, err := s.compressed(ctx)
	if err != nil {
		return tar2git.Result{}, err
	}
	c := &counter{r: raw}
	stop := s.progress(c, logf)
	defer stop()
	how := decompressor(s.file)
	if s.member != "" {
		how = "xz"
	}
	tarStream, closeDec, err := decompress(ctx, c, how)
	if err != nil {
		closeRaw()
		return tar2git.Result{}, err
	}
	w, wait, err := fastImport(ctx, q)
	if err != nil {
		closeRaw()
		return tar2git.Result{}, err
	}
	res, cerr := tar2git.Convert(bufio.NewReaderSize(tarStream, 1<<20), w, tar2git.Options{
		Branch: "import", Message: s.Title, Name: "patcheval import", Email: "import@patcheval.invalid", Strip: true})
	if cerr != nil && errors.Is(cerr, syscall.EPIPE) {
		cancel()
		closeDec()
		closeRaw()
		return res, wait() // fast-import's own error
	}
	derr := closeDec()
	rerr := closeRaw()
	if cerr == nil && derr == nil && rerr == nil {
		return res, wait()
	}
	cancel() // fast-import gets no "done": it writes no ref
	wait()
	if parent.Err() != nil {
		return res, fail.Infra(parent.Err())
	}
	for _, e := range []error{rerr, derr, cerr} {
		if e != nil {
			if fail.KindOf(e) == fail.KindInfra {
				return res, fail.Inputf("%s: %v (corrupt or truncated)", s.file, e)
			}
			return res, e
		}
	}
	return res, nil
}

// progress prints how much of the compressed tarball was read, every 5 s.
func (s *Source) progress(c *counter, logf func(string, ...any)) (stop func()) {
	return progress.Every(5*time.Second, func() {
		if s.size > 0 {
			logf("importing %s: %d%% of %d MB", s.Tag, c.n.Load()*100/s.size, s.size>>20)
		}
	})
}

// decompress returns the decompressed stream of r: gzip in process, xz and
// zstd through their commands (a core of their own).
func decompress(ctx context.Context, r io.Reader, how string) (io.Reader, func() error, error) {
	switch how {
	case "":
		return r, func() error { return nil }, nil
	case "gzip":
		z, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, fail.Inputf("gzip: %v", err)
		}
		return z, func() error { io.Copy(io.Discard, z); return nil }, nil
	}
	cmd := exec.CommandContext(ctx, how, "-dc")
	cmd.Stdin = r
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, fail.Infra(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, fail.Infraf("%s: %v (apt-get install %s)", how, err, map[string]string{"xz": "xz-utils", "zstd": "zstd"}[how])
	}
	return out, func() error {
		io.Copy(io.Discard, out)
		if err := cmd.Wait(); err != nil {
			return fail.Inputf("%s -dc: %v: %s", how, err, strings.TrimSpace(stderr.String()))
		}
		return nil
	}, nil
}
