package reporters

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/google/go-github/v60/github"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/secretfile"
	"github.com/patcheval/patcheval/pipelines/store"
)

// GitHubName is the GitHub reporter's name.
const GitHubName = "github"

// GitHub commit status states.
const (
	StatusPending = "pending"
	StatusSuccess = "success"
	StatusFailure = "failure"
	StatusError   = "error"
)

// GitHubPost is the payload of one GitHub post: a push of the applied
// branch, a commit status, a PR comment or a check run.
type GitHubPost struct {
	Kind string `json:"kind"` // "push", "status", "comment", "check"
	// LocalRepo and Commit: the applied series (push: pushed as Branch).
	LocalRepo   string `json:"local_repo,omitempty"`
	Commit      string `json:"commit"`
	Branch      string `json:"branch"`
	State       string `json:"state,omitempty"`
	Context     string `json:"context,omitempty"`
	Description string `json:"description,omitempty"`
	TargetURL   string `json:"target_url,omitempty"`
	// Markdown is the report (comment, check run summary).
	Markdown string `json:"markdown,omitempty"`
}

// GitHubResult is what QueueGitHub posts for one evaluation.
type GitHubResult struct {
	LocalRepo, Commit, Branch, Pipeline string
	// State is a commit status state (pending, success, failure, error).
	State, Description, TargetURL, Markdown string
}

// QueueGitHub queues, for evaluation evalID: the push of the applied
// branch, the commit status on its head, and for a final state the
// Markdown report as a PR comment (posted when a PR exists for the
// branch) and, when the reporter is a GitHub App (app), a check run.
func QueueGitHub(st *store.Store, evalID int64, r GitHubResult, app bool) ([]*store.Post, error) {
	return queueGitHub(st, GitHubName, evalID, r, app)
}

// Queue is QueueGitHub for this reporter (its Instance, and check runs
// when it is a GitHub App).
func (g *GitHub) Queue(st *store.Store, evalID int64, r GitHubResult) ([]*store.Post, error) {
	return queueGitHub(st, g.Name(), evalID, r, g.App)
}

func queueGitHub(st *store.Store, name string, evalID int64, r GitHubResult, app bool) ([]*store.Post, error) {
	switch r.State {
	case StatusPending, StatusSuccess, StatusFailure, StatusError:
	default:
		return nil, fail.Inputf("github: state %q: want pending, success, failure or error", r.State)
	}
	if !plumbing.IsHash(r.Commit) || r.Branch == "" || !plumbing.ReferenceName("refs/heads/"+r.Branch).IsBranch() {
		return nil, fail.Inputf("github: want a full commit hash and a branch name (got %q, %q)", r.Commit, r.Branch)
	}
	ctx := CheckContext(r.Pipeline)
	desc := strings.Join(strings.Fields(r.Description), " ")
	if len(desc) > 140 { // GitHub's limit for a status description
		desc = desc[:137] + "..."
	}
	base := GitHubPost{LocalRepo: r.LocalRepo, Commit: r.Commit, Branch: r.Branch, State: r.State, Context: ctx,
		Description: desc, TargetURL: r.TargetURL}
	var posts []GitHubPost
	push := base
	push.Kind, push.State, push.Description, push.TargetURL, push.Context = "push", "", "", "", ""
	posts = append(posts, push)
	status := base
	status.Kind = "status"
	posts = append(posts, status)
	if r.State != StatusPending && r.Markdown != "" {
		c := base
		c.Kind, c.Markdown = "comment", r.Markdown
		posts = append(posts, c)
		if app {
			k := base
			k.Kind, k.Markdown = "check", r.Markdown
			posts = append(posts, k)
		}
	}
	var out []*store.Post
	for _, p := range posts {
		target := p.Kind + " " + p.Branch
		if p.Kind != "push" {
			target = p.Kind + " " + p.Commit + " " + p.Context
		}
		q, err := Enqueue(st, name, target, evalID, p.State, p, false)
		if err != nil {
			return out, err
		}
		out = append(out, q)
	}
	return out, nil
}

// GitHub posts to one repository through the REST API
// (github.com/google/go-github/v60): it pushes the applied branch to the
// repository's git URL (go-git), sets a commit status on its head (a
// plain token is enough), comments the Markdown report on the open PR
// whose head is that branch (none: nothing to comment), and creates check
// runs only when App is set (the Checks API takes GitHub App tokens
// only). Statuses never go back to pending and a status identical to the
// newest one in its context is not posted again; comments carry a marker
// so that a retry after a crash finds them.
//
// It authenticates with a plain token from a file (NewGitHub), or as a
// GitHub App installation (NewGitHubApp): installation access tokens are
// made from the App's private key and replaced before they expire (they
// last an hour), and one GitHub refuses before its time is replaced at
// once. Tokens and keys never appear in errors or logs.
type GitHub struct {
	Owner, Repo string
	// GitURL is where branches are pushed (https://github.com/o/r.git).
	GitURL string
	// App says the reporter posts as a GitHub App (check runs too).
	App bool
	// Instance tells this reporter's posts from other GitHub reporters'
	// (the followed list's name); "" for the only one.
	Instance  string
	auth      tokenSource
	client    *github.Client
	transport *tokenTransport
}

// NewGitHub reads the token from tokenFile. apiURL is "" for github.com,
// else the API base URL (GitHub Enterprise, tests). app says the token is
// a GitHub App installation token someone else keeps fresh in the file.
func NewGitHub(repo, gitURL, tokenFile, apiURL string, app bool) (*GitHub, error) {
	tok, err := secretfile.Read("github: token file", tokenFile)
	if err != nil {
		return nil, err
	}
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return nil, fail.Inputf("github: token file %s: want one token on one line", tokenFile)
	}
	g, err := newGitHub(repo, gitURL, apiURL)
	if err != nil {
		return nil, err
	}
	g.App, g.auth = app, staticToken(tok)
	g.transport.src = g.auth
	return g, nil
}

// NewGitHubApp posts as installation app.InstallationID of GitHub App
// app.AppID, with the App's private key from app.PrivateKeyFile. now is
// the clock (nil: time.Now).
func NewGitHubApp(repo, gitURL string, app GitHubApp, apiURL string, now func() time.Time) (*GitHub, error) {
	g, err := newGitHub(repo, gitURL, apiURL)
	if err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	a, err := newAppToken(app, g.client, now)
	if err != nil {
		return nil, err
	}
	g.App, g.auth = true, a
	g.transport.src = g.auth
	return g, nil
}

func newGitHub(repo, gitURL, apiURL string) (*GitHub, error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return nil, fail.Inputf("github: repo %q: want owner/name", repo)
	}
	tt := &tokenTransport{}
	c := github.NewClient(&http.Client{Timeout: 60 * time.Second, Transport: tt})
	if apiURL != "" {
		var err error
		if c, err = c.WithEnterpriseURLs(apiURL, apiURL); err != nil {
			return nil, fail.Inputf("github: api url %q: %v", apiURL, err)
		}
		// WithEnterpriseURLs adds /api/v3/ to a bare host; keep the URL
		// as given.
		c.BaseURL, _ = c.BaseURL.Parse(strings.TrimRight(apiURL, "/") + "/")
	}
	if gitURL == "" {
		gitURL = "https://github.com/" + repo + ".git"
	}
	return &GitHub{Owner: owner, Repo: name, GitURL: gitURL, client: c, transport: tt}, nil
}

// Name implements Reporter.
func (g *GitHub) Name() string { return instanceName(GitHubName, g.Instance) }

// RemoteID implements Reporter.
func (g *GitHub) RemoteID(*store.Post) string { return "" }

// apiError maps go-github's errors: rate limits become RetryAfter, 401,
// 403 and 422 are refusals (Permanent), the rest is retried.
func apiError(what string, err error) error {
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		return &RetryAfter{At: rl.Rate.Reset.Time, Err: fmt.Errorf("github: %s: rate limit exhausted", what)}
	}
	var ab *github.AbuseRateLimitError
	if errors.As(err, &ab) {
		at := time.Now().Add(time.Minute)
		if d := ab.GetRetryAfter(); d > 0 {
			at = time.Now().Add(d)
		}
		return &RetryAfter{At: at, Err: fmt.Errorf("github: %s: secondary rate limit", what)}
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch er.Response.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden:
			return Permanent(fmt.Errorf("github: %s: %s %s (check the token and its permissions)", what, er.Response.Status, er.Message))
		case http.StatusUnprocessableEntity:
			if strings.Contains(er.Message, "No commit found") {
				// The push has not reached GitHub yet.
				return fmt.Errorf("github: %s: %s", what, er.Message)
			}
			return Permanent(fmt.Errorf("github: %s: 422 %s %v", what, er.Message, er.Errors))
		}
		return fmt.Errorf("github: %s: %s %s", what, er.Response.Status, er.Message)
	}
	return fmt.Errorf("github: %s: %w", what, err)
}

func commentMarker(p *store.Post) string {
	return fmt.Sprintf("<!-- patcheval %s %.16s -->", p.Target, p.Digest)
}

// Deliver implements Reporter.
func (g *GitHub) Deliver(ctx context.Context, p *store.Post, resumed bool) (string, error) {
	var gp GitHubPost
	if err := json.Unmarshal([]byte(p.Payload), &gp); err != nil {
		return "", Permanent(fmt.Errorf("github: post %d: payload: %w", p.ID, err))
	}
	switch gp.Kind {
	case "push":
		return g.push(ctx, gp)
	case "status":
		return g.status(ctx, gp)
	case "comment":
		return g.comment(ctx, p, gp)
	case "check":
		if !g.App {
			return "", Permanent(errors.New("github: check runs need a GitHub App (set app_id, installation_id and private_key_file); commit statuses work with a plain token"))
		}
		return g.check(ctx, gp)
	}
	return "", Permanent(fmt.Errorf("github: post %d: unknown kind %q", p.ID, gp.Kind))
}

func (g *GitHub) push(ctx context.Context, gp GitHubPost) (string, error) {
	// gittree's opener and push: go-git's Remote.Push walks every object
	// reachable from the mirror's refs (all of linux.git's history) to
	// find what to send; gittree.Push walks only the commits between the
	// pushed commit and the mirror's refs, and writes nothing locally.
	r, st, _, err := gittree.Open(gp.LocalRepo, 64)
	if err != nil {
		return "", Permanent(fmt.Errorf("github: push: opening %s: %w", gp.LocalRepo, err))
	}
	defer st.Close()
	tok, _, err := g.auth.Token(ctx)
	if err != nil {
		return "", err
	}
	_, err = gittree.Push(ctx, r, g.GitURL, &githttp.BasicAuth{Username: "x-access-token", Password: tok},
		plumbing.NewHash(gp.Commit), plumbing.ReferenceName("refs/heads/"+gp.Branch))
	if err != nil {
		return "", fmt.Errorf("github: pushing %s to %s: %s", gp.Branch, g.GitURL, strings.ReplaceAll(err.Error(), tok, "***"))
	}
	return g.GitURL + "#" + gp.Branch, nil
}

func (g *GitHub) status(ctx context.Context, gp GitHubPost) (string, error) {
	have, _, err := g.client.Repositories.ListStatuses(ctx, g.Owner, g.Repo, gp.Commit, &github.ListOptions{PerPage: 100})
	if err != nil {
		return "", apiError("listing statuses of "+gp.Commit, err)
	}
	// GitHub lists the newest first.
	for _, s := range have {
		if s.GetContext() != gp.Context {
			continue
		}
		if s.GetState() == gp.State && s.GetDescription() == gp.Description && s.GetTargetURL() == gp.TargetURL {
			return s.GetURL(), ErrAlreadyPosted
		}
		if gp.State == StatusPending && s.GetState() != StatusPending {
			return "", ErrAlreadyPosted // never back to pending
		}
		break
	}
	rs := &github.RepoStatus{State: github.String(gp.State), Context: github.String(gp.Context),
		Description: github.String(gp.Description)}
	if gp.TargetURL != "" {
		rs.TargetURL = github.String(gp.TargetURL)
	}
	made, _, err := g.client.Repositories.CreateStatus(ctx, g.Owner, g.Repo, gp.Commit, rs)
	if err != nil {
		return "", apiError("status on "+gp.Commit, err)
	}
	return made.GetURL(), nil
}

func (g *GitHub) comment(ctx context.Context, p *store.Post, gp GitHubPost) (string, error) {
	prs, _, err := g.client.PullRequests.List(ctx, g.Owner, g.Repo, &github.PullRequestListOptions{
		State: "open", Head: g.Owner + ":" + gp.Branch})
	if err != nil {
		return "", apiError("pull requests of "+gp.Branch, err)
	}
	if len(prs) == 0 {
		return "", ErrNoPullRequest
	}
	n := prs[0].GetNumber()
	marker := commentMarker(p)
	cs, _, err := g.client.Issues.ListComments(ctx, g.Owner, g.Repo, n, &github.IssueListCommentsOptions{
		ListOptions: github.ListOptions{PerPage: 100}})
	if err != nil {
		return "", apiError(fmt.Sprintf("comments of PR %d", n), err)
	}
	for _, c := range cs {
		if strings.Contains(c.GetBody(), marker) {
			return c.GetHTMLURL(), ErrAlreadyPosted
		}
	}
	made, _, err := g.client.Issues.CreateComment(ctx, g.Owner, g.Repo, n, &github.IssueComment{
		Body: github.String(gp.Markdown + "\n\n" + marker)})
	if err != nil {
		return "", apiError(fmt.Sprintf("comment on PR %d", n), err)
	}
	return made.GetHTMLURL(), nil
}

// ErrNoPullRequest: no open PR has the branch as its head; the comment is
// not posted (the post is marked skipped).
var ErrNoPullRequest = fmt.Errorf("no open pull request for the branch: %w", ErrAlreadyPosted)

func (g *GitHub) check(ctx context.Context, gp GitHubPost) (string, error) {
	have, _, err := g.client.Checks.ListCheckRunsForRef(ctx, g.Owner, g.Repo, gp.Commit, &github.ListCheckRunsOptions{
		CheckName: github.String(gp.Context)})
	if err != nil {
		return "", apiError("check runs of "+gp.Commit, err)
	}
	conclusion := map[string]string{StatusSuccess: "success", StatusFailure: "failure", StatusError: "action_required"}[gp.State]
	for _, c := range have.CheckRuns {
		if c.GetConclusion() == conclusion && c.GetOutput().GetTitle() == gp.Description {
			return c.GetHTMLURL(), ErrAlreadyPosted
		}
	}
	summary := gp.Markdown
	if len(summary) > 65535 {
		summary = summary[:65000] + "\n\n(cut)"
	}
	opts := github.CreateCheckRunOptions{Name: gp.Context, HeadSHA: gp.Commit, Status: github.String("completed"),
		Conclusion: github.String(conclusion),
		Output:     &github.CheckRunOutput{Title: github.String(gp.Description), Summary: github.String(summary)}}
	if gp.TargetURL != "" {
		opts.DetailsURL = github.String(gp.TargetURL)
	}
	made, _, err := g.client.Checks.CreateCheckRun(ctx, g.Owner, g.Repo, opts)
	if err != nil {
		return "", apiError("check run on "+gp.Commit, err)
	}
	return made.GetHTMLURL(), nil
}
