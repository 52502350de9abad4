// Package artifact is the farm's content-addressed artifact store: blobs
// (kernel images, System.map, .config, metadata, logs) kept under their
// SHA-256, so that a build made on one machine boots on another without a
// shared filesystem (issue 14).
//
// Store is the whole interface: Put and Open by key, the lower-case hex
// SHA-256 of the content. Every implementation refuses a Put whose content
// does not hash to its key and verifies on read (the reader Open returns
// fails at EOF on a mismatch), so a corrupt or forged blob is never used.
//
//   - Dir keeps blobs in a directory (the coordinator's store, and every
//     worker's cache);
//   - Client talks to Handler on the coordinator (PUT/GET
//     /api/v1/artifacts/<sha256>, writes with the service's token) and
//     caches what it reads in a Dir;
//   - an S3-compatible store fits the same two methods: Put is PutObject
//     of key "sha256/<key>" after hashing (or with x-amz-checksum-sha256,
//     which S3 verifies itself), Open is GetObject through the same
//     verifying reader; Client would then be given the bucket instead of
//     the coordinator's URL, and workers' Dir caches stay as they are.
//
// PutDir and FetchDir move a build's artifact directory through a Store
// as a manifest (file name -> key).
package artifact

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/internal/digest"
	"github.com/patcheval/patcheval/internal/fail"
)

// Store is a content-addressed blob store.
type Store interface {
	// Put stores r's content under key, its SHA-256 in lower-case hex.
	// Content that does not hash to key is refused (ErrMismatch) and
	// nothing is stored. Putting a key already present is a no-op.
	Put(ctx context.Context, key string, r io.Reader) error
	// Open returns key's content (ErrNotFound when absent). Reading it
	// to EOF fails with ErrMismatch if the content does not hash to key.
	Open(ctx context.Context, key string) (io.ReadCloser, error)
}

var (
	// ErrNotFound: no blob under the key.
	ErrNotFound = errors.New("artifact not found")
	// ErrMismatch: the content's SHA-256 is not its key.
	ErrMismatch = errors.New("content does not match its sha256 key")
)

// CheckKey reports whether key is a SHA-256 in lower-case hex (an input
// error naming it otherwise).
func CheckKey(key string) error {
	if len(key) != 64 || strings.Trim(key, "0123456789abcdef") != "" {
		return fail.Inputf("artifact key %q: want a sha256 in lower-case hex (64 characters)", key)
	}
	return nil
}

// Key is content's key.
func Key(content []byte) string {
	sum := sha256.Sum256(content)
	return hex.EncodeToString(sum[:])
}

// verifying reads r and fails at EOF unless what it read hashes to key.
type verifying struct {
	r   io.ReadCloser
	h   hash.Hash
	key string
}

// Verify wraps r (key's content, from anywhere) so that reading it to EOF
// fails with ErrMismatch unless the content hashes to key.
func Verify(r io.ReadCloser, key string) io.ReadCloser {
	return &verifying{r: r, h: sha256.New(), key: key}
}

func (v *verifying) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	if err == io.EOF {
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.key {
			return n, fmt.Errorf("artifact %s: read content with sha256 %s: %w", v.key, got, ErrMismatch)
		}
	}
	return n, err
}

func (v *verifying) Close() error { return v.r.Close() }

// Dir is a Store in a directory: <Path>/<key[:2]>/<key>.
type Dir struct{ Path string }

func (d Dir) path(key string) string { return filepath.Join(d.Path, key[:2], key) }

// Put writes r to a temporary file, hashing it, and renames it into place
// only when the hash is key.
func (d Dir) Put(ctx context.Context, key string, r io.Reader) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	dst := d.path(key)
	if _, err := os.Stat(dst); err == nil {
		_, err := io.Copy(io.Discard, r) // the sender's content is not needed, but drain it
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fail.Infraf("artifact store %s: %w", d.Path, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".put-*")
	if err != nil {
		return fail.Infraf("artifact store %s: %w", d.Path, err)
	}
	defer os.Remove(tmp.Name())
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(tmp, h), ctxReader{ctx, r}); err != nil {
		tmp.Close()
		return fail.Infraf("artifact %s: %w", key, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fail.Infraf("artifact %s: %w", key, err)
	}
	if err := tmp.Close(); err != nil {
		return fail.Infraf("artifact %s: %w", key, err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != key {
		return fail.Input(fmt.Errorf("artifact %s: the content's sha256 is %s: %w", key, got, ErrMismatch))
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return fail.Infraf("artifact %s: %w", key, err)
	}
	return nil
}

// Open opens key's file behind the verifying reader.
func (d Dir) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	f, err := os.Open(d.path(key))
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("artifact %s: %w", key, ErrNotFound)
	}
	if err != nil {
		return nil, fail.Infraf("artifact %s: %w", key, err)
	}
	return Verify(f, key), nil
}

// ctxReader stops a copy when ctx ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// Manifest names a directory's files (relative slash paths) by key.
type Manifest map[string]string

// PutDir puts every regular file under dir into st and returns the
// manifest (symlinks and other non-regular files are left out).
func PutDir(ctx context.Context, st Store, dir string) (Manifest, error) {
	m := Manifest{}
	err := filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !de.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		key, err := digest.File(p)
		if err != nil {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := st.Put(ctx, key, f); err != nil {
			return err
		}
		m[filepath.ToSlash(rel)] = key
		return nil
	})
	if err != nil {
		return nil, fail.Infraf("artifact: putting %s: %w", dir, err)
	}
	return m, nil
}

// ID is the manifest's own key: the same files give the same ID.
func (m Manifest) ID() string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "%s %s\n", m[n], n)
	}
	return Key([]byte(b.String()))
}

// FetchDir makes dir hold m's files, read (and verified) from st. A dir
// already complete (its .complete file names m's ID) is left as it is;
// otherwise the files are fetched into a temporary directory beside it
// that is renamed into place, so a partial fetch is never taken for a
// whole one.
func FetchDir(ctx context.Context, st Store, m Manifest, dir string) error {
	id := m.ID()
	if b, err := os.ReadFile(filepath.Join(dir, ".complete")); err == nil && strings.TrimSpace(string(b)) == id {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fail.Infraf("artifact: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".fetch-*")
	if err != nil {
		return fail.Infraf("artifact: %w", err)
	}
	defer os.RemoveAll(tmp)
	for name, key := range m {
		if strings.HasPrefix(name, "/") || strings.Contains("/"+name+"/", "/../") {
			return fail.Inputf("artifact manifest: file name %q leaves its directory", name)
		}
		if err := fetchFile(ctx, st, key, filepath.Join(tmp, filepath.FromSlash(name))); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(tmp, ".complete"), []byte(id+"\n"), 0o644); err != nil {
		return fail.Infraf("artifact: %w", err)
	}
	os.RemoveAll(dir) // an incomplete one from an earlier attempt
	if err := os.Rename(tmp, dir); err != nil {
		return fail.Infraf("artifact: %w", err)
	}
	return nil
}

func fetchFile(ctx context.Context, st Store, key, dst string) error {
	r, err := st.Open(ctx, key)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fail.Infraf("artifact: %w", err)
	}
	f, err := os.Create(dst)
	if err != nil {
		return fail.Infraf("artifact: %w", err)
	}
	if _, err := io.Copy(f, ctxReader{ctx, r}); err != nil {
		f.Close()
		if errors.Is(err, ErrMismatch) {
			return fail.Infraf("artifact %s (%s): %w", key, filepath.Base(dst), err)
		}
		return fail.Infraf("artifact %s: %w", key, err)
	}
	return f.Close()
}
