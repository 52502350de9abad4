package artifact

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// MaxBlob bounds one PUT (a kernel image with debug info is a few hundred
// MiB).
const MaxBlob = 2 << 30

// Handler serves st over HTTP, mounted at a prefix that it strips itself
// (prefix ends in "/"): GET and HEAD prefix<key>, and PUT prefix<key> with
// "Authorization: Bearer <token>". Without a token every PUT is refused
// (403): the store takes no unauthenticated writes, whatever else the
// server allows. A PUT whose content does not hash to its key is refused
// (400) and nothing is stored.
func Handler(prefix string, st Store, token []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.URL.Path, prefix)
		if !ok || CheckKey(key) != nil {
			http.Error(w, fmt.Sprintf("artifact key %q: want a sha256 in lower-case hex", key), http.StatusBadRequest)
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead:
			rc, err := st.Open(r.Context(), key)
			if errors.Is(err, ErrNotFound) {
				http.Error(w, "no artifact "+key, http.StatusNotFound)
				return
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			defer rc.Close()
			w.Header().Set("Content-Type", "application/octet-stream")
			w.Header().Set("ETag", `"`+key+`"`)
			w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
			if r.Method == http.MethodHead {
				return
			}
			// A blob corrupted on the coordinator's disk fails the
			// verifying reader at EOF: the copy stops short and the
			// client's own check fails too.
			io.Copy(w, rc)
		case http.MethodPut:
			if len(token) == 0 {
				http.Error(w, "artifact writes need the service's token (serve --token-file)", http.StatusForbidden)
				return
			}
			got, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if got == "" || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), token) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="patcheval"`)
				http.Error(w, "missing or wrong token", http.StatusUnauthorized)
				return
			}
			err := st.Put(r.Context(), key, http.MaxBytesReader(w, r.Body, MaxBlob))
			switch {
			case errors.Is(err, ErrMismatch):
				http.Error(w, err.Error(), http.StatusBadRequest)
			case err != nil:
				http.Error(w, err.Error(), http.StatusInternalServerError)
			default:
				w.WriteHeader(http.StatusCreated)
			}
		default:
			w.Header().Set("Allow", "GET, HEAD, PUT")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		}
	})
}

// Client is a Store on a coordinator's Handler at Base (".../artifacts/"),
// writing with Token, with what it reads cached (and verified) in Cache.
type Client struct {
	Base  string
	Token []byte
	Cache Dir
	HTTP  *http.Client // nil: http.DefaultClient
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

// Put sends r's content to the coordinator (which verifies it) and keeps
// it in the cache.
func (c *Client) Put(ctx context.Context, key string, r io.Reader) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	// Into the cache first: it verifies the content, and the PUT then
	// streams a file whose length is known.
	if err := c.Cache.Put(ctx, key, r); err != nil {
		return err
	}
	f, err := c.Cache.Open(ctx, key)
	if err != nil {
		return err
	}
	defer f.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, c.Base+key, f)
	if err != nil {
		return fail.Inputf("artifact store %s: %v", c.Base, err)
	}
	req.Header.Set("Authorization", "Bearer "+string(c.Token))
	resp, err := c.http().Do(req)
	if err != nil {
		return fail.Infraf("artifact %s: PUT %s: %w", key, c.Base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		err := fmt.Errorf("artifact %s: PUT %s: %s: %s", key, c.Base, resp.Status, strings.TrimSpace(string(msg)))
		if resp.StatusCode >= 500 {
			return fail.Infra(err)
		}
		return fail.Input(err)
	}
	return nil
}

// Open serves key from the cache, fetching it from the coordinator into
// the cache first (verified on the way in, and again when read).
func (c *Client) Open(ctx context.Context, key string) (io.ReadCloser, error) {
	if rc, err := c.Cache.Open(ctx, key); err == nil || !errors.Is(err, ErrNotFound) {
		return rc, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.Base+key, nil)
	if err != nil {
		return nil, fail.Inputf("artifact store %s: %v", c.Base, err)
	}
	if len(c.Token) > 0 {
		req.Header.Set("Authorization", "Bearer "+string(c.Token))
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return nil, fail.Infraf("artifact %s: GET %s: %w", key, c.Base, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("artifact %s at %s: %w", key, c.Base, ErrNotFound)
	case resp.StatusCode != http.StatusOK:
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fail.Infraf("artifact %s: GET %s: %s: %s", key, c.Base, resp.Status, strings.TrimSpace(string(msg)))
	}
	if err := c.Cache.Put(ctx, key, resp.Body); err != nil {
		return nil, err
	}
	return c.Cache.Open(ctx, key)
}
