package reporters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/internal/redact"
	"github.com/patcheval/patcheval/internal/secretfile"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Patchwork check states (Patchwork's Check.state).
const (
	CheckPending = "pending"
	CheckSuccess = "success"
	CheckWarning = "warning"
	CheckFail    = "fail"
)

// PatchworkName is the Patchwork reporter's name.
const PatchworkName = "patchwork"

// PatchworkCheck is one check on one patch (the payload of a Patchwork
// post).
type PatchworkCheck struct {
	// MsgID is the patch's Message-ID, without angle brackets.
	MsgID       string `json:"msgid"`
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url,omitempty"`
}

var contextRe = lazyre.New(`^[A-Za-z0-9_.-]+$`)

// CheckContext is the check context of a pipeline: patcheval-<pipeline>,
// restricted to what Patchwork accepts in a context (a slug).
func CheckContext(pipeline string) string {
	b := []byte("patcheval-" + pipeline)
	for i, c := range b {
		if !contextRe.Match([]byte{c}) {
			b[i] = '-'
		}
	}
	return string(b)
}

// QueuePatchworkChecks queues one check per patch of a series (msgids,
// in order) for evaluation evalID: state is CheckPending when the
// evaluation is queued, then success, warning or fail; description is
// one line (the headline verdict with its CI).
func QueuePatchworkChecks(st *store.Store, evalID int64, pipeline string, msgids []string, state, description, targetURL string) ([]*store.Post, error) {
	return queuePatchworkChecks(st, PatchworkName, evalID, pipeline, msgids, state, description, targetURL)
}

// QueueChecks is QueuePatchworkChecks for this reporter (its Instance).
func (pw *Patchwork) QueueChecks(st *store.Store, evalID int64, pipeline string, msgids []string, state, description, targetURL string) ([]*store.Post, error) {
	return queuePatchworkChecks(st, pw.Name(), evalID, pipeline, msgids, state, description, targetURL)
}

func queuePatchworkChecks(st *store.Store, name string, evalID int64, pipeline string, msgids []string, state, description, targetURL string) ([]*store.Post, error) {
	switch state {
	case CheckPending, CheckSuccess, CheckWarning, CheckFail:
	default:
		return nil, fail.Inputf("patchwork: check state %q: want pending, success, warning or fail", state)
	}
	description = strings.Join(strings.Fields(description), " ")
	ctx := CheckContext(pipeline)
	var out []*store.Post
	for _, m := range msgids {
		m = strings.Trim(strings.TrimSpace(m), "<>")
		c := PatchworkCheck{MsgID: m, State: state, Context: ctx, Description: description, TargetURL: targetURL}
		p, err := Enqueue(st, name, m+" "+ctx, evalID, state, c, false)
		if err != nil {
			return out, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Patchwork posts checks through Patchwork's REST API (version 1.2 or
// later): it finds each patch by Message-ID (GET
// /api/1.2/patches/?msgid=), reads the patch's checks in the same
// context, and POSTs /api/1.2/patches/{id}/checks/ only when the new
// check differs from the latest one there and does not move a final
// state back to pending. Checks cannot be edited in Patchwork: a new
// check in the same context supersedes the old one on its pages.
type Patchwork struct {
	// URL is the instance's base URL, e.g. https://patchwork.ozlabs.org.
	URL string
	// Project optionally restricts the Message-ID lookup to one project
	// (its linkname), for instances where a patch was sent to several.
	Project string
	// Token authorises the POSTs (Authorization: Token ...). Never logged.
	Token  string
	Client *http.Client
	// Instance tells this reporter's posts from other Patchwork
	// reporters' (the followed list's name); "" for the only one.
	Instance string
}

// NewPatchwork reads the token from tokenFile (one line).
func NewPatchwork(baseURL, project, tokenFile string) (*Patchwork, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fail.Inputf("patchwork: url %q: want http(s)://host[/path]", redact.URL(baseURL))
	}
	tok, err := secretfile.Read("patchwork: token file", tokenFile)
	if err != nil {
		return nil, err
	}
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return nil, fail.Inputf("patchwork: token file %s: want one token on one line", tokenFile)
	}
	return &Patchwork{URL: strings.TrimRight(baseURL, "/"), Project: project, Token: tok}, nil
}

// Name implements Reporter.
func (pw *Patchwork) Name() string { return instanceName(PatchworkName, pw.Instance) }

// RemoteID implements Reporter: a check's URL is known only after it is
// created.
func (pw *Patchwork) RemoteID(*store.Post) string { return "" }

func (pw *Patchwork) client() *http.Client {
	if pw.Client != nil {
		return pw.Client
	}
	return &http.Client{Timeout: 60 * time.Second}
}

// httpError turns a non-2xx response into an error: 401/403/400/422 are
// permanent (bad token, invalid check), 429/503 honour Retry-After, the
// rest are retried.
func httpError(what string, resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	err := fmt.Errorf("%s: %s: %s", what, resp.Status, strings.Join(strings.Fields(string(body)), " "))
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return Permanent(fmt.Errorf("%w (check the token)", err))
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return Permanent(err)
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if at, ok := retryAfter(resp.Header, time.Now()); ok {
			return &RetryAfter{At: at, Err: err}
		}
	}
	return err
}

// retryAfter reads Retry-After (seconds or an HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Time, bool) {
	v := h.Get("Retry-After")
	if v == "" {
		return time.Time{}, false
	}
	if n, err := strconv.Atoi(v); err == nil && n >= 0 {
		return now.Add(time.Duration(n) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}

func (pw *Patchwork) do(ctx context.Context, method, u string, body any, out any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if pw.Token != "" {
		req.Header.Set("Authorization", "Token "+pw.Token)
	}
	resp, err := pw.client().Do(req)
	if err != nil {
		return nil, fmt.Errorf("patchwork: %s %s: %w", method, redactURL(u), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp, httpError("patchwork: "+method+" "+redactURL(u), resp)
	}
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, 32<<20)).Decode(out); err != nil {
			return resp, fmt.Errorf("patchwork: %s %s: decoding the answer: %w", method, redactURL(u), err)
		}
	}
	return resp, nil
}

func redactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(bad url)"
	}
	p.User = nil
	return p.String()
}

type pwPatch struct {
	ID    int64  `json:"id"`
	MsgID string `json:"msgid"`
}

type pwCheck struct {
	ID          int64  `json:"id"`
	URL         string `json:"url"`
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	TargetURL   string `json:"target_url"`
}

var nextLinkRe = lazyre.New(`<([^>]+)>\s*;\s*rel="?next"?`)

// latestCheck is the newest check on patch id in context, nil when none.
// Patchwork pages lists with Link: rel="next" headers.
func (pw *Patchwork) latestCheck(ctx context.Context, id int64, context string) (*pwCheck, error) {
	u := fmt.Sprintf("%s/api/1.2/patches/%d/checks/?context=%s&per_page=100", pw.URL, id, url.QueryEscape(context))
	var latest *pwCheck
	for page := 0; u != "" && page < 50; page++ {
		var list []pwCheck
		resp, err := pw.do(ctx, http.MethodGet, u, nil, &list)
		if err != nil {
			return nil, err
		}
		for i := range list {
			if list[i].Context == context && (latest == nil || list[i].ID > latest.ID) {
				latest = &list[i]
			}
		}
		u = ""
		if m := nextLinkRe.FindStringSubmatch(resp.Header.Get("Link")); m != nil {
			u = m[1]
		}
	}
	return latest, nil
}

// Deliver implements Reporter.
func (pw *Patchwork) Deliver(ctx context.Context, p *store.Post, resumed bool) (string, error) {
	var c PatchworkCheck
	if err := json.Unmarshal([]byte(p.Payload), &c); err != nil {
		return "", Permanent(fmt.Errorf("patchwork: post %d: payload: %w", p.ID, err))
	}
	q := url.Values{"msgid": {c.MsgID}}
	if pw.Project != "" {
		q.Set("project", pw.Project)
	}
	var patches []pwPatch
	if _, err := pw.do(ctx, http.MethodGet, pw.URL+"/api/1.2/patches/?"+q.Encode(), nil, &patches); err != nil {
		return "", err
	}
	if len(patches) == 0 {
		// Patchwork parses the list's mail on its own schedule: retried.
		return "", fmt.Errorf("patchwork: patch <%s> is not (yet) in Patchwork", c.MsgID)
	}
	if len(patches) > 1 {
		return "", Permanent(fmt.Errorf("patchwork: %d patches have Message-ID <%s>: set the project", len(patches), c.MsgID))
	}
	id := patches[0].ID
	last, err := pw.latestCheck(ctx, id, c.Context)
	if err != nil {
		return "", err
	}
	if last != nil {
		if last.State == c.State && last.Description == c.Description && last.TargetURL == c.TargetURL {
			return last.URL, ErrAlreadyPosted
		}
		if c.State == CheckPending && last.State != CheckPending {
			return "", ErrAlreadyPosted // never back to pending
		}
	}
	body := map[string]string{"state": c.State, "context": c.Context, "description": c.Description}
	if c.TargetURL != "" {
		body["target_url"] = c.TargetURL
	}
	var made pwCheck
	if _, err := pw.do(ctx, http.MethodPost, fmt.Sprintf("%s/api/1.2/patches/%d/checks/", pw.URL, id), body, &made); err != nil {
		return "", err
	}
	if made.URL != "" {
		return made.URL, nil
	}
	return fmt.Sprintf("%s/api/1.2/patches/%d/checks/%d/", pw.URL, id, made.ID), nil
}
