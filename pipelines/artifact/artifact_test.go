package artifact

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const token = "0123456789abcdef-farm"

// coordinator serves a Dir through Handler on loopback, as serve mounts it.
func coordinator(t *testing.T) (Dir, string) {
	d := Dir{t.TempDir()}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/artifacts/", Handler("/api/v1/artifacts/", d, []byte(token)))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return d, srv.URL + "/api/v1/artifacts/"
}

func put(t *testing.T, url, key, tok string, body []byte) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url+key, bytes.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHandlerRefuses: no token, a wrong token, a key that is not the
// content's sha256, or not a sha256 at all: refused, and nothing stored.
func TestHandlerRefuses(t *testing.T) {
	d, url := coordinator(t)
	body := []byte("vmlinux bytes")
	key := Key(body)
	for _, c := range []struct {
		name, key, tok string
		want           int
	}{
		{"no token", key, "", http.StatusUnauthorized},
		{"wrong token", key, "not-the-token-at-all", http.StatusUnauthorized},
		{"key of other content", Key([]byte("other")), token, http.StatusBadRequest},
		{"not a sha256", "abc", token, http.StatusBadRequest},
		{"upper-case hex", strings.ToUpper(key), token, http.StatusBadRequest},
	} {
		if got := put(t, url, c.key, c.tok, body); got != c.want {
			t.Errorf("%s: PUT answered %d, want %d", c.name, got, c.want)
		}
	}
	ents, _ := os.ReadDir(d.Path)
	for _, e := range ents {
		sub, _ := os.ReadDir(filepath.Join(d.Path, e.Name()))
		if len(sub) > 0 {
			t.Errorf("refused PUTs left %s/%s", e.Name(), sub[0].Name())
		}
	}
	// No token configured: every write refused.
	srv := httptest.NewServer(Handler("/", Dir{t.TempDir()}, nil))
	defer srv.Close()
	if got := put(t, srv.URL+"/", key, token, body); got != http.StatusForbidden {
		t.Errorf("PUT to a store without a token: %d, want 403", got)
	}
	if got := put(t, url, key, token, body); got != http.StatusCreated {
		t.Errorf("a good PUT: %d", got)
	}
}

// TestClientRoundTrip: a worker's Client puts a directory through the
// coordinator; another worker (its own cache) fetches it; a blob
// corrupted in the coordinator's store is detected on read, and one
// corrupted in a worker's cache too.
func TestClientRoundTrip(t *testing.T) {
	ctx := context.Background()
	coord, url := coordinator(t)
	src := t.TempDir()
	files := map[string]string{"vmlinux": strings.Repeat("\x7fELF", 1000), "System.map": "c0000000 T _stext\n", "config": "CONFIG_PPC64=y\n", "sub/metadata.json": "{}"}
	for n, c := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(src, n)), 0o755)
		if err := os.WriteFile(filepath.Join(src, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	builder := &Client{Base: url, Token: []byte(token), Cache: Dir{t.TempDir()}}
	m, err := PutDir(ctx, builder, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(m) != len(files) || m["sub/metadata.json"] != Key([]byte("{}")) {
		t.Fatalf("manifest %v", m)
	}
	if _, err := coord.Open(ctx, m["vmlinux"]); err != nil {
		t.Fatalf("the coordinator does not hold vmlinux: %v", err)
	}
	booter := &Client{Base: url, Cache: Dir{t.TempDir()}} // reads need no token here
	dst := filepath.Join(t.TempDir(), "kernel")
	if err := FetchDir(ctx, booter, m, dst); err != nil {
		t.Fatal(err)
	}
	for n, c := range files {
		if got, _ := os.ReadFile(filepath.Join(dst, n)); string(got) != c {
			t.Errorf("fetched %s = %q", n, got)
		}
	}
	if err := FetchDir(ctx, booter, m, dst); err != nil {
		t.Fatalf("fetching a complete directory again: %v", err)
	}

	// Corrupt the coordinator's copy of System.map; a fresh worker must
	// refuse it, and keep nothing in its cache.
	key := m["System.map"]
	if err := os.WriteFile(coord.path(key), []byte("c0000000 T evil\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fresh := &Client{Base: url, Cache: Dir{t.TempDir()}}
	err = FetchDir(ctx, fresh, m, filepath.Join(t.TempDir(), "k"))
	if !errors.Is(err, ErrMismatch) {
		t.Fatalf("fetching a corrupted blob: %v, want ErrMismatch", err)
	}
	if _, err := fresh.Cache.Open(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Errorf("the corrupted blob was cached: %v", err)
	}
	// A worker's own cache corrupted: reading it fails too.
	if err := os.WriteFile(booter.Cache.path(key), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	rc, err := booter.Open(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadAll(rc); !errors.Is(err, ErrMismatch) {
		t.Errorf("reading a corrupted cache entry: %v, want ErrMismatch", err)
	}
	rc.Close()
	if _, err := booter.Open(ctx, Key([]byte("never stored"))); !errors.Is(err, ErrNotFound) {
		t.Errorf("an absent key: %v", err)
	}
}
