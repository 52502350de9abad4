package reporters

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/pipelines/store"
)

// fakeApp is the GitHub App side of fakeGitHub, as GitHub's REST docs
// describe it: POST /app/installations/{installation_id}/access_tokens,
// authenticated with "Authorization: Bearer <JWT>" (RS256, signed with the
// App's private key, iss the app ID, exp at most 10 minutes after iat and
// not past), answers 201 {"token": "ghs_...", "expires_at": one hour
// later}; a JWT it cannot verify gets 401 "A JSON web token could not be
// decoded", an installation it does not know 404. The tokens it made
// authenticate the API until they expire or are revoked; then 401 "Bad
// credentials".
type fakeApp struct {
	appID        int64
	installation int64
	pub          *rsa.PublicKey
	now          func() time.Time
	tokens       map[string]time.Time
	minted       int
	// refused counts API requests with an expired or revoked token.
	refused int
}

func (a *fakeApp) accessToken(w http.ResponseWriter, r *http.Request, js func(http.ResponseWriter, int, any)) {
	bad := func() { js(w, 401, map[string]any{"message": "A JSON web token could not be decoded"}) }
	jwt, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	parts := strings.Split(jwt, ".")
	if !ok || len(parts) != 3 {
		bad()
		return
	}
	enc := base64.RawURLEncoding
	var hdr struct{ Alg string }
	var claims struct {
		Iat, Exp int64
		Iss      json.RawMessage
	}
	h, err1 := enc.DecodeString(parts[0])
	c, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(h, &hdr) != nil || json.Unmarshal(c, &claims) != nil || hdr.Alg != "RS256" {
		bad()
		return
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(a.pub, crypto.SHA256, sum[:], sig) != nil {
		bad()
		return
	}
	now := a.now().Unix()
	iss := strings.Trim(string(claims.Iss), `"`)
	if iss != strconv.FormatInt(a.appID, 10) || claims.Exp-claims.Iat > 10*60+60 || claims.Exp <= now || claims.Iat > now+60 {
		js(w, 401, map[string]any{"message": "'Expiration time' claim ('exp') is too far in the future"})
		return
	}
	if r.URL.Path != fmt.Sprintf("/app/installations/%d/access_tokens", a.installation) {
		js(w, 404, map[string]any{"message": "Not Found"})
		return
	}
	a.minted++
	tok := fmt.Sprintf("ghs_%d", a.minted)
	exp := a.now().Add(time.Hour).UTC().Truncate(time.Second)
	a.tokens[tok] = exp
	js(w, 201, map[string]any{"token": tok, "expires_at": exp.Format(time.RFC3339),
		"permissions": map[string]string{"checks": "write", "statuses": "write", "contents": "write"}, "repository_selection": "selected"})
}

// valid says whether the Authorization header carries a live token it
// made (nil: no App).
func (a *fakeApp) valid(auth string) bool {
	if a == nil {
		return false
	}
	tok := strings.TrimPrefix(auth, "Bearer ")
	exp, ok := a.tokens[tok]
	if ok && a.now().Before(exp) {
		return true
	}
	if ok {
		a.refused++
	}
	return false
}

// appKey writes a new RSA key as GitHub gives it (PKCS#1 PEM) and returns
// the file and the key.
func appKey(t *testing.T, dir string) (string, *rsa.PrivateKey) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, fmt.Sprintf("app-%d.pem", time.Now().UnixNano()))
	pemText := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(p, pemText, 0o600); err != nil {
		t.Fatal(err)
	}
	return p, key
}

// TestGitHubAppFakeAPIInstallationTokenRefresh: against an httptest
// server that follows GitHub's documented App API, the reporter makes an
// installation access token from the App's key (a JWT), keeps it while
// it is good, replaces it before it expires (its clock runs 57 minutes on
// mid-run), replaces at once one GitHub refuses before its time (revoked:
// the 401 is retried with a new token, the post goes through), and posts
// check runs. A key GitHub does not take (401) and an installation it
// does not know (404) fail the post for good with errors that say what to
// check, and show neither a token nor the JWT.
func TestGitHubAppFakeAPIInstallationTokenRefresh(t *testing.T) {
	_, sha, _, _ := gitFixture(t)
	dir := t.TempDir()
	keyFile, key := appKey(t, dir)
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }

	f := newFakeGitHub(t, "plain-token-not-used")
	f.app = &fakeApp{appID: 12345, installation: 77, pub: &key.PublicKey, now: now, tokens: map[string]time.Time{}}
	f.commits[sha] = true
	app := GitHubApp{AppID: "12345", InstallationID: 77, PrivateKeyFile: keyFile}
	gh, err := NewGitHubApp("o/r", "", app, f.URL, now)
	if err != nil {
		t.Fatal(err)
	}
	st := openStore(t, filepath.Join(dir, "db"))
	id := newEval(t, st)
	ctx := context.Background()
	ob := &Outbox{Store: st, Reporters: []Reporter{gh}}
	post := func(desc string) *store.Post {
		t.Helper()
		p, err := Enqueue(st, GitHubName, "status "+sha+" patcheval-p", id, StatusSuccess,
			GitHubPost{Kind: "status", Commit: sha, Branch: "b", State: StatusSuccess, Context: "patcheval-p", Description: desc}, false)
		if err != nil {
			t.Fatal(err)
		}
		ob.Flush(ctx)
		p, _ = st.Post(p.ID)
		return p
	}
	counts := func() (minted, refused int) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.app.minted, f.app.refused
	}

	if p := post("first"); p.Status != store.PostSent {
		t.Fatalf("first status: %+v", p)
	}
	if m, r := counts(); m != 1 || r != 0 {
		t.Fatalf("after the first post: %d tokens made, %d refused; want 1, 0", m, r)
	}
	advance(30 * time.Minute)
	if p := post("half an hour on"); p.Status != store.PostSent {
		t.Fatalf("second status: %+v", p)
	}
	if m, _ := counts(); m != 1 {
		t.Errorf("a good token was replaced: %d made", m)
	}
	// 3 minutes before the token expires: a new one before the request.
	advance(27 * time.Minute)
	if p := post("57 minutes on"); p.Status != store.PostSent {
		t.Fatalf("third status: %+v", p)
	}
	if m, r := counts(); m != 2 || r != 0 {
		t.Errorf("near expiry: %d tokens made, %d requests refused; want 2, 0 (replaced before it expired)", m, r)
	}
	// GitHub revokes the token mid-run: the 401 is retried with a new one.
	f.mu.Lock()
	for tok := range f.app.tokens {
		f.app.tokens[tok] = clock.Add(-time.Second)
	}
	f.mu.Unlock()
	if p := post("after a revocation"); p.Status != store.PostSent {
		t.Fatalf("status after the token was revoked: %+v", p)
	}
	if m, r := counts(); m != 3 || r != 1 {
		t.Errorf("after a revocation: %d tokens made, %d refused; want 3, 1", m, r)
	}
	f.mu.Lock()
	if n := len(f.statuses[sha]); n != 4 {
		t.Errorf("GitHub has %d statuses, want 4", n)
	}
	f.mu.Unlock()

	// An App posts check runs.
	ps, err := gh.Queue(st, id, GitHubResult{LocalRepo: "/nonexistent", Commit: sha, Branch: "b", Pipeline: "p",
		State: StatusFailure, Description: "kill ns/op +24.8%", Markdown: "## regression"})
	if err != nil || len(ps) != 4 {
		t.Fatalf("queue: %v %v", ps, err)
	}
	ob.Flush(ctx)
	f.mu.Lock()
	if len(f.checks) != 1 || f.checks[0]["conclusion"] != "failure" || f.checks[0]["name"] != "patcheval-p" {
		t.Errorf("check runs: %v", f.checks)
	}
	f.mu.Unlock()

	// A key GitHub does not know, and an installation it does not know.
	otherKey, _ := appKey(t, dir)
	for _, tc := range []struct {
		name string
		app  GitHubApp
		want []string
	}{
		{"401 for a JWT signed with another key", GitHubApp{AppID: "12345", InstallationID: 77, PrivateKeyFile: otherKey},
			[]string{"401", "app 12345 installation 77", "check app_id and private_key_file " + otherKey}},
		{"404 for an installation GitHub does not know", GitHubApp{AppID: "12345", InstallationID: 78, PrivateKeyFile: keyFile},
			[]string{"404", "app 12345 installation 78", "check installation_id"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g, err := NewGitHubApp("o/r", "", tc.app, f.URL, now)
			if err != nil {
				t.Fatal(err)
			}
			st := openStore(t, filepath.Join(t.TempDir(), "db"))
			p, _ := Enqueue(st, GitHubName, "status x", 0, StatusSuccess, GitHubPost{Kind: "status", Commit: sha, State: StatusSuccess, Context: "c"}, false)
			(&Outbox{Store: st, Reporters: []Reporter{g}}).Flush(ctx)
			p, _ = st.Post(p.ID)
			if p.Status != store.PostFailed {
				t.Errorf("post %s, want failed for good: %s", p.Status, p.LastError)
			}
			for _, w := range tc.want {
				if !strings.Contains(p.LastError, w) {
					t.Errorf("error lacks %q: %s", w, p.LastError)
				}
			}
			if strings.Contains(p.LastError, "ghs_") || strings.Contains(p.LastError, "eyJ") {
				t.Errorf("a token or the JWT in the error: %s", p.LastError)
			}
		})
	}

	// Bad configuration is bad input naming the file, never its content.
	os.WriteFile(filepath.Join(dir, "bad.pem"), []byte("-----BEGIN RSA PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END RSA PRIVATE KEY-----\n"), 0o600)
	for _, tc := range []struct {
		app  GitHubApp
		want string
	}{
		{GitHubApp{AppID: "12345", InstallationID: 77, PrivateKeyFile: filepath.Join(dir, "bad.pem")}, "bad.pem: the RSA PRIVATE KEY block is neither"},
		{GitHubApp{AppID: "12345", InstallationID: 77, PrivateKeyFile: filepath.Join(dir, "none.pem")}, "none.pem"},
		{GitHubApp{AppID: "12345", PrivateKeyFile: keyFile}, "installation_id 0"},
		{GitHubApp{InstallationID: 77, PrivateKeyFile: keyFile}, "app_id"},
	} {
		_, err := NewGitHubApp("o/r", "", tc.app, f.URL, now)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%+v: error %v, want one with %q", tc.app, err, tc.want)
		}
	}
}
