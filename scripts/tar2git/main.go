// Command tar2git turns a tar stream into a `git fast-import` stream: one
// commit holding every regular file and symlink of the archive, with its
// leading directory stripped, so that a source tarball becomes a git
// commit without being extracted to disk.
//
//	xz -dc linux.tar.xz | tar2git -message "Linux 6.1" -tag v6.1-debian |
//		git --git-dir=repo.git fast-import --done
//
// The commit is deterministic: fixed author, committer and date (flags),
// the tree exactly what `git add -f -A` of the extracted archive records
// (file modes from the owner's execute bit, symlinks as links, hard links
// as the file they name, later entries replacing earlier ones, devices and
// FIFOs left out). scripts/linux-tree.sh uses it.
package main

import (
	"archive/tar"
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"strings"
	"time"
)

type options struct {
	branch, tag, message string
	name, email          string
	date                 time.Time
	strip                bool
}

func main() {
	var o options
	var date string
	flag.StringVar(&o.branch, "branch", "master", "branch the commit goes to")
	flag.StringVar(&o.tag, "tag", "", "lightweight tag on the commit (none if empty)")
	flag.StringVar(&o.message, "message", "", "commit message (required)")
	flag.StringVar(&o.name, "name", "patcheval import", "author and committer name")
	flag.StringVar(&o.email, "email", "import@patcheval.invalid", "author and committer email")
	flag.StringVar(&date, "date", "2022-12-11T14:15:00Z", "author and committer date (RFC 3339)")
	flag.BoolVar(&o.strip, "strip", true, "strip the archive's one leading directory")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tar2git -message MSG [-tag TAG] <archive.tar | git fast-import --done")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || o.message == "" {
		flag.Usage()
		os.Exit(2)
	}
	t, err := time.Parse(time.RFC3339, date)
	if err != nil {
		fmt.Fprintf(os.Stderr, "tar2git: -date %q: %v\n", date, err)
		os.Exit(2)
	}
	o.date = t
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	n, err := convert(bufio.NewReaderSize(os.Stdin, 1<<20), out, o)
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tar2git: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "tar2git: %d files\n", n)
}

// entry is one path of the commit's tree: its mode and the mark of its blob.
type entry struct {
	mode string
	mark int
}

// convert reads the tar archive from r and writes the fast-import stream to
// w; it returns how many paths the commit holds.
func convert(r io.Reader, w *bufio.Writer, o options) (int, error) {
	tr := tar.NewReader(r)
	files := map[string]entry{}
	var order []string // first appearance, for a stable stream
	mark, prefix := 0, ""
	blob := func(size int64, body io.Reader) (int, error) {
		mark++
		fmt.Fprintf(w, "blob\nmark :%d\ndata %d\n", mark, size)
		if _, err := io.CopyN(w, body, size); err != nil {
			return 0, err
		}
		return mark, w.WriteByte('\n')
	}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("reading archive: %w", err)
		}
		name, err := clean(h.Name)
		if err != nil {
			return 0, err
		}
		if o.strip {
			top, rest, _ := strings.Cut(name, "/")
			if prefix == "" {
				prefix = top
			}
			if top != prefix {
				return 0, fmt.Errorf("archive entry %q is outside the leading directory %q", h.Name, prefix)
			}
			name = rest
		}
		if name == "" {
			continue
		}
		var e entry
		switch h.Typeflag {
		case tar.TypeReg, tar.TypeRegA:
			e.mode = "100644"
			if h.Mode&0o100 != 0 {
				e.mode = "100755"
			}
			if e.mark, err = blob(h.Size, tr); err != nil {
				return 0, fmt.Errorf("archive entry %q: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			e.mode = "120000"
			if e.mark, err = blob(int64(len(h.Linkname)), strings.NewReader(h.Linkname)); err != nil {
				return 0, err
			}
		case tar.TypeLink:
			target, err := clean(h.Linkname)
			if err == nil && o.strip {
				_, target, _ = strings.Cut(target, "/")
			}
			old, ok := files[target]
			if err != nil || !ok {
				return 0, fmt.Errorf("archive entry %q: hard link to %q, which is not an earlier file", h.Name, h.Linkname)
			}
			e = old
		case tar.TypeDir:
			continue
		default: // devices, FIFOs: git add records none of them
			continue
		}
		if _, seen := files[name]; !seen {
			order = append(order, name)
		}
		files[name] = e
	}
	if len(files) == 0 {
		return 0, errors.New("archive holds no files")
	}
	// A path that became a directory later (or the reverse) is not
	// representable; tar extraction would fail on it too.
	for _, p := range order {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, clash := files[d]; clash {
				return 0, fmt.Errorf("archive has %q both as a file and as a directory", d)
			}
		}
	}
	when := strconv.FormatInt(o.date.Unix(), 10) + " +0000"
	ident := fmt.Sprintf("%s <%s> %s", o.name, o.email, when)
	msg := strings.TrimRight(o.message, "\n") + "\n"
	mark++
	commit := mark
	fmt.Fprintf(w, "commit refs/heads/%s\nmark :%d\nauthor %s\ncommitter %s\ndata %d\n%s",
		o.branch, commit, ident, ident, len(msg), msg)
	for _, p := range order {
		e := files[p]
		fmt.Fprintf(w, "M %s :%d %s\n", e.mode, e.mark, quote(p))
	}
	w.WriteString("\n")
	if o.tag != "" {
		fmt.Fprintf(w, "reset refs/tags/%s\nfrom :%d\n\n", o.tag, commit)
	}
	_, err := w.WriteString("done\n")
	return len(files), err
}

// clean normalises an archive path and refuses ones that would leave the
// tree (absolute, "..") or name git's own directory.
func clean(name string) (string, error) {
	p := path.Clean(strings.TrimPrefix(name, "./"))
	if p == "." {
		return "", nil
	}
	if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("archive entry %q leaves the tree", name)
	}
	for _, part := range strings.Split(p, "/") {
		if strings.EqualFold(part, ".git") {
			return "", fmt.Errorf("archive entry %q names a .git directory", name)
		}
	}
	return p, nil
}

// quote writes a path the way fast-import reads it: C-style quoted (octal
// escapes, as git's unquote_c_style reads them) when it starts with a quote
// or holds a control character or backslash.
func quote(p string) string {
	if !strings.HasPrefix(p, `"`) && strings.IndexFunc(p, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) < 0 {
		return p
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(p); i++ {
		c := p[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&b, "\\%03o", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
