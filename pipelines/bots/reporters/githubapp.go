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
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-github/v60/github"

	"github.com/patcheval/patcheval/internal/fail"
)

// GitHubApp is how a GitHub App reporter authenticates: as installation
// InstallationID of the App AppID (its client ID or numeric app ID), with
// the App's private key (the PEM file GitHub gives) in PrivateKeyFile.
type GitHubApp struct {
	AppID          string
	InstallationID int64
	PrivateKeyFile string
}

// tokenSource gives the token of the next request.
type tokenSource interface {
	// Token returns the token to use now; fresh says it was just made
	// (a 401 with it is final).
	Token(ctx context.Context) (tok string, fresh bool, err error)
	// Refused drops tok after the far end refused it (401) before its
	// time, so that the next Token makes a new one.
	Refused(tok string)
}

// staticToken is a plain token from a file.
type staticToken string

func (s staticToken) Token(context.Context) (string, bool, error) { return string(s), true, nil }
func (staticToken) Refused(string)                                {}

// appRefreshBefore: an installation token (valid 1 h) is replaced when
// less than this is left, so that no request starts with a token about
// to expire.
const appRefreshBefore = 5 * time.Minute

// appToken makes and keeps a GitHub App installation access token: a JWT
// signed with the App's key (RS256; iat 60 s back, exp 9 min ahead: GitHub
// takes at most 10) buys one from POST /app/installations/{id}/
// access_tokens, kept until appRefreshBefore its expires_at.
type appToken struct {
	app GitHubApp
	key *rsa.PrivateKey
	// apps is a client authenticated with a fresh JWT per request.
	apps *github.Client
	now  func() time.Time

	mu      sync.Mutex
	tok     string
	expires time.Time
}

func newAppToken(app GitHubApp, base *github.Client, now func() time.Time) (*appToken, error) {
	if app.AppID == "" || strings.ContainsAny(app.AppID, " \t\r\n\"") {
		return nil, fail.Inputf("github: app_id %q: want the App's client ID or numeric app ID", app.AppID)
	}
	if app.InstallationID <= 0 {
		return nil, fail.Inputf("github: installation_id %d: want the App installation's id (a positive number)", app.InstallationID)
	}
	b, err := os.ReadFile(app.PrivateKeyFile)
	if err != nil {
		return nil, fail.Inputf("github: private_key_file: %w", err)
	}
	key, err := parseRSAKey(b)
	if err != nil {
		return nil, fail.Inputf("github: private_key_file %s: %v", app.PrivateKeyFile, err)
	}
	a := &appToken{app: app, key: key, now: now}
	hc := &http.Client{Timeout: 60 * time.Second, Transport: jwtTransport{a}}
	a.apps = github.NewClient(hc)
	a.apps.BaseURL = base.BaseURL
	return a, nil
}

// parseRSAKey reads an RSA private key in PEM: PKCS#1 ("RSA PRIVATE KEY",
// what GitHub gives) or PKCS#8. The error never shows the key.
func parseRSAKey(b []byte) (*rsa.PrivateKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block (want the .pem private key GitHub generated for the App)")
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the %s block is neither a PKCS#1 nor a PKCS#8 private key", blk.Type)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("the key is a %T, GitHub Apps sign with RSA", k)
	}
	return rk, nil
}

// jwt is a JSON Web Token for the App, as GitHub documents it.
func (a *appToken) jwt() (string, error) {
	now := a.now()
	var iss any = a.app.AppID
	if n, err := strconv.ParseInt(a.app.AppID, 10, 64); err == nil {
		iss = n // a numeric app ID
	}
	hdr, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"iat": now.Add(-60 * time.Second).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": iss})
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString(hdr) + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fail.Infraf("github: app %s: signing the JWT: %v", a.app.AppID, err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

// Token implements tokenSource.
func (a *appToken) Token(ctx context.Context) (string, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tok != "" && a.now().Before(a.expires.Add(-appRefreshBefore)) {
		return a.tok, false, nil
	}
	it, _, err := a.apps.Apps.CreateInstallationToken(ctx, a.app.InstallationID, nil)
	what := fmt.Sprintf("app %s installation %d: creating an installation access token", a.app.AppID, a.app.InstallationID)
	if err != nil {
		var er *github.ErrorResponse
		if errors.As(err, &er) && er.Response != nil {
			switch er.Response.StatusCode {
			case http.StatusUnauthorized:
				return "", false, Permanent(fmt.Errorf("github: %s: %s %s (GitHub did not take the App's JWT: check app_id and private_key_file %s)",
					what, er.Response.Status, er.Message, a.app.PrivateKeyFile))
			case http.StatusNotFound, http.StatusForbidden:
				return "", false, Permanent(fmt.Errorf("github: %s: %s %s (check installation_id: is the App installed on the repository?)",
					what, er.Response.Status, er.Message))
			}
		}
		return "", false, apiError(what, err)
	}
	if it.GetToken() == "" || it.ExpiresAt == nil {
		return "", false, fmt.Errorf("github: %s: the answer has no token or no expires_at", what)
	}
	a.tok, a.expires = it.GetToken(), it.GetExpiresAt().Time
	return a.tok, true, nil
}

// Refused implements tokenSource.
func (a *appToken) Refused(tok string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.tok == tok {
		a.tok = ""
	}
}

// jwtTransport authenticates as the App itself (a new JWT per request).
type jwtTransport struct{ a *appToken }

func (t jwtTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	j, err := t.a.jwt()
	if err != nil {
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+j)
	return http.DefaultTransport.RoundTrip(r)
}

// tokenTransport authenticates every API request with src's token. A 401
// with a token that was not just made (GitHub revoked it, or the clocks
// disagree about its expiry) drops it and retries once with a new one;
// a second 401 is the answer.
type tokenTransport struct{ src tokenSource }

func (t *tokenTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	tok, fresh, err := t.src.Token(ctx)
	if err != nil {
		return nil, err
	}
	resp, err := t.send(req, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || fresh || (req.Body != nil && req.GetBody == nil) {
		return resp, err
	}
	resp.Body.Close()
	t.src.Refused(tok)
	if tok, _, err = t.src.Token(ctx); err != nil {
		return nil, err
	}
	again := req.Clone(ctx)
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return t.send(again, tok)
}

func (t *tokenTransport) send(req *http.Request, tok string) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return http.DefaultTransport.RoundTrip(r)
}
