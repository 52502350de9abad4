package follow

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/bots/reporters"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// v2epoch writes public-inbox v2 epochs by hand (one commit per message,
// the message in the blob "m", a removal as "d"), so that a test can put
// in what public-inbox-mda would refuse: a message without any header.
type v2epoch struct {
	t   *testing.T
	dir string
	n   int
}

func newEpoch(t *testing.T, root string, n int) *v2epoch {
	dir := filepath.Join(root, "list", "git", strings.TrimSpace(string(rune('0'+n)))+".git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testgit.Git(t, nil, nil, "init", "-q", "--bare", "-b", "master", dir)
	return &v2epoch{t: t, dir: dir}
}

func (e *v2epoch) add(file string, raw []byte) {
	e.n++
	g := func(stdin []byte, args ...string) string {
		env := []string{"GIT_COMMITTER_NAME=pi", "GIT_COMMITTER_EMAIL=pi@example.org", "GIT_AUTHOR_NAME=pi",
			"GIT_AUTHOR_EMAIL=pi@example.org", "GIT_COMMITTER_DATE=" + time.Now().Format(time.RFC3339)}
		return testgit.Git(e.t, env, stdin, append([]string{"--git-dir=" + e.dir}, args...)...)
	}
	blob := g(raw, "hash-object", "-w", "--stdin")
	tree := g([]byte("100644 blob "+blob+"\t"+file+"\n"), "mktree")
	args := []string{"commit-tree", tree, "-m", "msg"}
	if parent, err := testgit.Run(nil, nil, "--git-dir="+e.dir, "rev-parse", "-q", "--verify", "refs/heads/master"); err == nil {
		args = append(args, "-p", parent)
	}
	c := g(nil, args...)
	g(nil, "update-ref", "refs/heads/master", c)
}

func TestFollowerSkipsMalformedAndCrossesEpochs(t *testing.T) {
	root := t.TempDir()
	srv := testgit.Serve(t, root)
	g := &gen{t0: time.Now()}
	e0 := newEpoch(t, root, 0)
	e0.add("m", g.reply("hello", "A <a@example.org>", "unrelated", "nothing@example.org", "nothing@example.org"))

	st, err := store.Open(filepath.Join(root, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q := &queue{st: st}
	l := List{Name: "list", URL: srv.URL() + "/list", Pipeline: "selinux-tax", Base: "tree", IncompleteAfter: time.Hour,
		Since: time.Now().Add(-time.Hour)}
	f := &Follower{Store: st, Lists: []List{l}, Submit: q, Dir: filepath.Join(root, "mirrors")}
	ctx := context.Background()
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}

	// Patch 1 and 2 of a series in epoch 0, a headerless message and a
	// removal between them; then epoch 1 starts and patch 3 lands there.
	msgs := g.series("eee", "Eve <eve@example.org>", "mm: spread over epochs", 1, 3, []string{"mm/slab.c"}, "")
	e0.add("m", msgs[0])
	e0.add("m", msgs[1])
	e0.add("m", []byte("this is not a mail at all\n"))
	e0.add("d", msgs[0]) // public-inbox's removal of a message
	e0.add("m", msgs[2])
	e1 := newEpoch(t, root, 1)
	e1.add("m", msgs[3])
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	ls, _ := st.FollowListState("list")
	if ls.Epoch != 1 || ls.Skipped != 1 || ls.Messages != 1+5 || ls.LastError != "" {
		t.Errorf("list state: %+v (want epoch 1, 1 skipped, 6 messages read)", ls)
	}
	s := seriesBy(t, st)["eee v1"]
	if s == nil || s.Status != store.SeriesSubmitted || s.Found != 3 {
		t.Fatalf("series across epochs: %+v", s)
	}
	// Steady state: only the newest epoch is fetched.
	before := srv.Requests
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if n := srv.Requests - before; n > 4 {
		t.Errorf("a quiet poll made %d requests", n)
	}
	if q.n != 1 {
		t.Errorf("%d submissions", q.n)
	}
}

// runnerService is the service's submission without its job queue:
// runner.Submit stores the evaluation and its inputs for real; the queue
// part is the status only (its workers need kernels).
type runnerService struct{ st *store.Store }

func (r runnerService) Submit(ctx context.Context, p *pipelines.Pipeline, o runner.Options) (int64, bool, error) {
	id, resumed, err := runner.Submit(ctx, runner.Env{Store: r.st}, p, o)
	if err != nil {
		return 0, false, err
	}
	return id, !resumed, r.st.SetEvaluationStatus(id, "queued")
}

func (r runnerService) Cancel(ctx context.Context, id int64) error {
	return r.st.SetEvaluationStatus(id, "cancelled")
}

func TestFollowerSubmitsThroughRunner(t *testing.T) {
	root := t.TempDir()
	srv := testgit.Serve(t, root)
	tree := filepath.Join(root, "tree")
	env := []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org"}
	testgit.Git(t, nil, nil, "init", "-q", "-b", "master", tree)
	os.MkdirAll(filepath.Join(tree, "mm"), 0o755)
	os.WriteFile(filepath.Join(tree, "mm/slab.c"), []byte("line\n"), 0o644)
	testgit.Git(t, env, nil, "-C", tree, "add", ".")
	testgit.Git(t, env, nil, "-C", tree, "commit", "-q", "-m", "base")
	g := &gen{t0: time.Now()}
	e0 := newEpoch(t, root, 0)
	for _, m := range g.series("rrr", "Ron <ron@example.org>", "mm: through the runner", 1, 2, []string{"mm/slab.c"}, "") {
		e0.add("m", m)
	}
	st, err := store.Open(filepath.Join(root, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// ppc-preempt-dynamic applies the series (selinux-tax does not).
	l := List{Name: "list", URL: srv.URL() + "/list", Pipeline: "ppc-preempt-dynamic", Tree: tree, Base: "tree",
		IncompleteAfter: time.Hour, Since: time.Now().Add(-time.Hour)}
	f := &Follower{Store: st, Lists: []List{l}, Submit: ServiceSubmitter{Service: runnerService{st}}, Dir: filepath.Join(root, "mirrors")}
	// Queued means a "pending" Patchwork check on every patch.
	f.Submitted = func(l List, s *series.Series, id int64) error {
		var ids []string
		for _, p := range s.Patches {
			ids = append(ids, p.MessageID)
		}
		_, err := reporters.QueuePatchworkChecks(st, id, l.Pipeline, ids, reporters.CheckPending, "queued", "")
		return err
	}
	if err := f.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ps, _ := st.Posts(0, store.PostQueued, 10); len(ps) != 2 || ps[1].Target != "rrr-v1-1@example.org patcheval-ppc-preempt-dynamic" || ps[1].State != "pending" {
		t.Errorf("pending checks: %v", ps)
	}
	s := seriesBy(t, st)["rrr v1"]
	if s == nil || s.Status != store.SeriesSubmitted {
		t.Fatalf("series: %+v", s)
	}
	ev, err := st.Evaluation(s.EvaluationID)
	if err != nil || ev.Status != "queued" || ev.SeriesMsgID != "rrr-v1-0@example.org" || ev.SeriesVersion != 1 ||
		ev.Pipeline != "ppc-preempt-dynamic" || ev.Tree != tree {
		t.Fatalf("evaluation: %+v, %v", ev, err)
	}
	// The reply will be addressed by the list's policy, not reply-all.
	in, _, err := st.Inputs(s.EvaluationID)
	if err != nil || !strings.Contains(string(in), `"recipients":{`) {
		t.Errorf("stored inputs lack the list's recipients policy: %s, %v", in, err)
	}
}
