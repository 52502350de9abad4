// Package tar2git turns a tar stream into a `git fast-import` stream: one
// commit holding every regular file and symlink of the archive, with its
// leading directory stripped, so that a source tarball becomes a git
// commit without being extracted to disk.
//
// The commit is deterministic: fixed author, committer and date (Options;
// a zero Date takes the newest modification time in the archive), the
// tree exactly what `git add -f -A` of the extracted archive records
// (file modes from the owner's execute bit, symlinks as links, hard links
// as the file they name, later entries replacing earlier ones, devices and
// FIFOs left out). scripts/tar2git is its command line;
// internal/linuxtree imports kernel releases with it.
package tar2git

import (
	"archive/tar"
	"bufio"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"
	"time"
)

// Options say where the commit goes and who made it when.
type Options struct {
	Branch  string    // the commit goes to refs/heads/Branch
	Tag     string    // lightweight tag on the commit (none if empty)
	Message string    // commit message
	Name    string    // author and committer name
	Email   string    // author and committer email
	Date    time.Time // author and committer date; zero: the archive's newest mtime
	Strip   bool      // strip the archive's one leading directory
}

// Result is what Convert wrote.
type Result struct {
	Files  int       // paths in the commit's tree
	Newest time.Time // newest modification time of the archive's entries
	Date   time.Time // the commit's date
}

// entry is one path of the commit's tree: its mode and the mark of its blob.
type entry struct {
	mode string
	mark int
}

// Convert reads the tar archive from r and writes the fast-import stream
// to w (not flushed); it returns how many paths the commit holds and the
// newest modification time of the archive's entries.
func Convert(r io.Reader, w *bufio.Writer, o Options) (Result, error) {
	tr := tar.NewReader(r)
	files := map[string]entry{}
	var order []string // first appearance, for a stable stream
	mark, prefix := 0, ""
	var newest time.Time
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
			return Result{}, fmt.Errorf("reading archive: %w", err)
		}
		name, err := clean(h.Name)
		if err != nil {
			return Result{}, err
		}
		if o.Strip {
			top, rest, _ := strings.Cut(name, "/")
			if prefix == "" {
				prefix = top
			}
			if top != prefix {
				return Result{}, fmt.Errorf("archive entry %q is outside the leading directory %q", h.Name, prefix)
			}
			name = rest
		}
		if h.ModTime.After(newest) {
			newest = h.ModTime
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
				return Result{}, fmt.Errorf("archive entry %q: %w", h.Name, err)
			}
		case tar.TypeSymlink:
			e.mode = "120000"
			if e.mark, err = blob(int64(len(h.Linkname)), strings.NewReader(h.Linkname)); err != nil {
				return Result{}, err
			}
		case tar.TypeLink:
			target, err := clean(h.Linkname)
			if err == nil && o.Strip {
				_, target, _ = strings.Cut(target, "/")
			}
			old, ok := files[target]
			if err != nil || !ok {
				return Result{}, fmt.Errorf("archive entry %q: hard link to %q, which is not an earlier file", h.Name, h.Linkname)
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
		return Result{}, errors.New("archive holds no files")
	}
	// A path that became a directory later (or the reverse) is not
	// representable; tar extraction would fail on it too.
	for _, p := range order {
		for d := path.Dir(p); d != "."; d = path.Dir(d) {
			if _, clash := files[d]; clash {
				return Result{}, fmt.Errorf("archive has %q both as a file and as a directory", d)
			}
		}
	}
	date := o.Date
	if date.IsZero() {
		date = newest
	}
	when := strconv.FormatInt(date.Unix(), 10) + " +0000"
	ident := fmt.Sprintf("%s <%s> %s", o.Name, o.Email, when)
	msg := strings.TrimRight(o.Message, "\n") + "\n"
	mark++
	commit := mark
	fmt.Fprintf(w, "commit refs/heads/%s\nmark :%d\nauthor %s\ncommitter %s\ndata %d\n%s",
		o.Branch, commit, ident, ident, len(msg), msg)
	for _, p := range order {
		e := files[p]
		fmt.Fprintf(w, "M %s :%d %s\n", e.mode, e.mark, quote(p))
	}
	w.WriteString("\n")
	if o.Tag != "" {
		fmt.Fprintf(w, "reset refs/tags/%s\nfrom :%d\n\n", o.Tag, commit)
	}
	_, err := w.WriteString("done\n")
	return Result{Files: len(files), Newest: newest, Date: date}, err
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
