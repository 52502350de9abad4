package follow

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/patcheval/patcheval/internal/testgit"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

func TestParseCommands(t *testing.T) {
	body := "Thanks.\n\n> #patcheval invalid\n#patcheval retest selinux-tax\r\n  #patcheval bisect\n#patcheval   test https://lore.kernel.org/r/a@b  \n#patcheval frob x\n#patchevalretest\n"
	got := ParseCommands(body)
	want := []Command{{Name: "retest", Args: []string{"selinux-tax"}}, {Name: "test", Args: []string{"https://lore.kernel.org/r/a@b"}},
		{Name: "unknown:frob", Args: []string{"x"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseCommands = %+v, want %+v", got, want)
	}
}

// triager records what it was asked to do.
type triager struct {
	mu   sync.Mutex
	done []string
}

func (tr *triager) Triage(ctx context.Context, r TriageRequest) (string, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	line := fmt.Sprintf("%s by %s as %s on evaluation %d (report %s)", r.Command, r.Reply.From.Email, r.Why, r.EvaluationID, r.Report)
	tr.done = append(tr.done, line)
	return "ok: " + r.Command.Name, nil
}

// TestTriageOnPublicInbox: replies to patcheval's report on a series,
// delivered by public-inbox-mda into a real public-inbox, carry commands
// from the author, a maintainer and a reviewer of the touched file (the
// evaluated tree's MAINTAINERS), a configured triage person, a stranger
// and a reply to the series instead of the report. The permitted ones
// reach the Triager once, the stranger's is recorded as ignored, and
// reading the same replies again does nothing more.
func TestTriageOnPublicInbox(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "tree")
	env := []string{"GIT_AUTHOR_NAME=a", "GIT_AUTHOR_EMAIL=a@example.org", "GIT_COMMITTER_NAME=a", "GIT_COMMITTER_EMAIL=a@example.org"}
	testgit.Git(t, nil, nil, "init", "-q", "-b", "master", tree)
	os.MkdirAll(filepath.Join(tree, "mm"), 0o755)
	os.WriteFile(filepath.Join(tree, "mm/slab.c"), []byte("line\n"), 0o644)
	os.WriteFile(filepath.Join(tree, "MAINTAINERS"), []byte("List of maintainers\n\nSLAB ALLOCATOR\nM:\tMae Maint <mae@example.org>\n"+
		"R:\tRex Review <rex@example.org>\nL:\tlinux-mm@example.org\nS:\tMaintained\nF:\tmm/slab.c\n\nTHE REST\nM:\tLinus Torvalds <torvalds@linux-foundation.org>\nL:\tlinux-kernel@vger.kernel.org\nS:\tBuried alive in reporters\nF:\t*\nF:\t*/\n"), 0o644)
	testgit.Git(t, env, nil, "-C", tree, "add", ".")
	testgit.Git(t, env, nil, "-C", tree, "commit", "-q", "-m", "base")

	g := &gen{t0: time.Now().Add(-time.Hour)}
	seed := writeMbox(t, root, "seed.mbox", g.series("old", "Old <old@example.org>", "mm: old", 1, 1, []string{"mm/slab.c"}, "")...)
	srv := testinbox.StartWith(t, testinbox.Options{Bulk: true, NoAll: true}, seed)
	t.Setenv("PATCHEVAL_LORE", "http://127.0.0.1:9/all")
	st, err := store.Open(filepath.Join(root, "db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tr := &triager{}
	token := filepath.Join(root, "pw-token")
	os.WriteFile(token, []byte("secret\n"), 0o600)
	l := List{Name: "test", URL: srv.URL + "/" + srv.Inbox, Pipeline: "ppc-preempt-dynamic", Tree: tree, Base: "tree",
		IncompleteAfter: time.Hour, Triage: []string{"boss@*"}, Address: "test@example.org",
		// The replies are not signed: From: as written (trust_test.go
		// shows the default, DKIM).
		Trust: TrustAny,
		// #patcheval test's git remote is the loopback server below.
		GitHosts: []string{"127.0.0.1"}, GitNetworks: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		// Never reached: the posts are only queued (no outbox runs here).
		Patchwork: &PatchworkConfig{URL: "http://127.0.0.1:9/api/1.2", TokenFile: token}, Mail: &MailConfig{Mode: "moderated"}}
	f := &Follower{Store: st, Lists: []List{l}, Submit: ServiceSubmitter{Service: runnerService{st}}, Dir: filepath.Join(root, "mirrors"), Triage: tr}
	ctx := context.Background()
	if err := f.Poll(ctx); err != nil { // first use: starts now
		t.Fatal(err)
	}
	sam := "Sam Dev <sam@example.org>"
	msgs := g.series("sss", sam, "mm/slab: faster", 1, 1, []string{"mm/slab.c"}, "")
	srv.Add(t, writeMbox(t, root, "series.mbox", msgs...))
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	s := seriesBy(t, st)["sss v1"]
	if s == nil || s.EvaluationID == 0 {
		t.Fatalf("series not submitted: %+v", s)
	}
	// The follower's evaluation links into its own list (this server has
	// no all index), not the global lore ($PATCHEVAL_LORE, set to a port
	// nothing listens on): the link the report builds answers.
	var in struct{ Lore string }
	if raw, _, err := st.Inputs(s.EvaluationID); err != nil || json.Unmarshal(raw, &in) != nil || in.Lore != l.URL {
		t.Errorf("stored lore %q (%v), want the list's %s", in.Lore, err, l.URL)
	}
	if link := mbox.LoreLink(in.Lore) + "sss-v1-0@example.org/"; httpStatus(t, link) != 200 {
		t.Errorf("the report's link %s does not answer", link)
	}
	// patcheval's report went out (the mail reporter's post, sent).
	report := fmt.Sprintf("report-%d@patcheval.example", s.EvaluationID)
	p, err := st.EnqueuePost(store.Post{Reporter: "mail", Target: "sss-v1-0@example.org ppc-preempt-dynamic", EvaluationID: s.EvaluationID,
		Digest: "d", Payload: `{"from":{"name":"patcheval","email":"bot@patcheval.example"}}`}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.MarkPostSending(p.ID, report); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkPostSent(p.ID, report); err != nil {
		t.Fatal(err)
	}
	cover := "sss-v1-0@example.org"
	msg := func(id, from, irt, refs, body string) []byte {
		return []byte(fmt.Sprintf("From: %s\nTo: test@example.org\nSubject: Re: [PATCH 0/1] mm/slab: faster\nDate: %s\nMessage-ID: <%s>\n"+
			"In-Reply-To: <%s>\nReferences: %s\n\n%s", from, g.date(), id, irt, refs, body))
	}
	refs := "<" + cover + "> <" + report + ">"
	replies := [][]byte{
		msg(report, "patcheval <bot@patcheval.example>", cover, "<"+cover+">", "Results: a regression.\n"),
		msg("r1@example.org", sam, report, refs, "> #patcheval invalid\nPlease run it again:\n#patcheval retest selinux-tax\n"),
		msg("r2@example.org", "Mallory <mallory@example.net>", report, refs, "#patcheval invalid\n"),
		msg("r3@example.org", "Mae Maint <mae@example.org>", report, refs, "#patcheval bisect\n"),
		msg("r4@example.org", "Big Boss <boss@example.com>", report, refs, "#patcheval test https://lore.kernel.org/r/x@example.org\n"),
		msg("r5@example.org", sam, cover, "<"+cover+">", "#patcheval retest\n"), // not a reply to the report
		msg("r6@example.org", "Rex Review <rex@example.org>", report, refs, "#patcheval frobnicate\n"),
	}
	srv.Add(t, writeMbox(t, root, "replies.mbox", replies...))
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	ev := s.EvaluationID
	want := []string{
		fmt.Sprintf("#patcheval retest selinux-tax by sam@example.org as author on evaluation %d (report %s)", ev, report),
		fmt.Sprintf("#patcheval bisect by mae@example.org as maintainer:SLAB ALLOCATOR on evaluation %d (report %s)", ev, report),
		fmt.Sprintf("#patcheval test https://lore.kernel.org/r/x@example.org by boss@example.com as triage on evaluation %d (report %s)", ev, report),
	}
	if !reflect.DeepEqual(tr.done, want) {
		t.Errorf("carried out:\n  %s\nwant:\n  %s", strings.Join(tr.done, "\n  "), strings.Join(want, "\n  "))
	}
	cmds, err := st.TriageCommands("test")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cmds {
		got = append(got, c.MsgID+" "+c.Command+" "+c.Status)
	}
	wantRows := []string{"r1@example.org #patcheval retest selinux-tax done", "r2@example.org #patcheval invalid ignored",
		"r3@example.org #patcheval bisect done", "r4@example.org #patcheval test https://lore.kernel.org/r/x@example.org done",
		"r6@example.org #patcheval unknown:frobnicate failed"}
	if !reflect.DeepEqual(got, wantRows) {
		t.Errorf("recorded:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(wantRows, "\n  "))
	}
	if len(cmds) > 1 && !strings.Contains(cmds[1].Note, "mallory@example.net is neither the series' author") {
		t.Errorf("the ignored command's note: %q", cmds[1].Note)
	}

	// The same replies read again (a re-read after a crash): nothing more.
	raws, err := st.FollowMessages("test", cover)
	if err != nil {
		t.Fatal(err)
	}
	var again []store.FollowMessage
	for i, r := range raws {
		again = append(again, store.FollowMessage{MsgID: fmt.Sprint(i), Root: cover, Raw: r})
	}
	if len(again) < len(replies) {
		t.Fatalf("%d messages filed under the thread, want at least %d", len(again), len(replies))
	}
	if err := f.triage(ctx, l, again); err != nil {
		t.Fatal(err)
	}
	if len(tr.done) != 3 {
		t.Errorf("re-reading the replies carried out %d commands in all, want 3", len(tr.done))
	}
	if cmds2, _ := st.TriageCommands("test"); len(cmds2) != len(cmds) {
		t.Errorf("re-reading recorded %d commands, want %d", len(cmds2), len(cmds))
	}

	// The service's triager: retest, retest with another pipeline,
	// invalid (Patchwork checks withdrawn), bisect (not yet); each
	// acknowledged in the thread through the list's mail reporter.
	rep, err := NewReporting(st, []List{l}, &mail.SMTPSettings{Host: "127.0.0.1"}, "http://127.0.0.1:8080", func(int64) string { return root }, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := &rerunService{runnerService: runnerService{st}}
	var bisected []int64
	var requesters []string
	bisector := func(ctx context.Context, id int64, requester string) (string, error) {
		bisected = append(bisected, id)
		requesters = append(requesters, requester)
		return fmt.Sprintf("bisection inside the series of evaluation %d started", id), nil
	}
	// "pairs" is a pipeline per-patch can use (base without the series,
	// patched with it); anything else is a shipped pipeline.
	pairs := filepath.Join(root, "pairs.toml")
	os.WriteFile(pairs, []byte("name = \"pairs\"\n[build]\narch = \"x86_64\"\nconfig = \"tinyconfig\"\nfragments = [\"qemu-boot\"]\n"+
		"[[variant]]\nname = \"base\"\napply_series = false\n[[variant]]\nname = \"patched\"\napply_series = true\n"+
		"[[benchmark]]\nname = \"getppid\"\n[[comparison]]\nbase = \"base\"\nother = \"patched\"\n"), 0o644)
	find := func(name string) (*pipelines.Pipeline, error) {
		if name == "pairs" {
			return pipelines.Load(pairs)
		}
		return pipelines.Builtin(name)
	}
	triager := ServiceTriager{Service: rs, Store: st, Reporting: rep, Bisect: bisector, Find: find}
	f.Triage = triager
	// #patcheval test names another series on the list's inbox, or a
	// branch of a git remote (served by git http-backend on loopback)
	// with two commits on top of the tree's master.
	srv.Add(t, writeMbox(t, root, "other.mbox", g.series("ttt", sam, "mm/slab: tidy", 1, 1, []string{"mm/slab.c"}, "")...))
	served := filepath.Join(root, "served", "linux.git")
	testgit.Git(t, nil, nil, "clone", "-q", "--bare", tree, served)
	master := strings.TrimSpace(testgit.Git(t, nil, nil, "--git-dir="+served, "rev-parse", "master"))
	topic := testgit.Commit(t, served, master, "mm/slab: first topic change", "2026-11-02T10:00:00Z", map[string]string{"mm/slab.c": "line\ntopic 1\n"})
	topic = testgit.Commit(t, served, topic, "mm/slab: second topic change", "2026-11-02T10:01:00Z", map[string]string{"mm/slab.c": "line\ntopic 1\ntopic 2\n"})
	testgit.Git(t, nil, nil, "--git-dir="+served, "update-ref", "refs/heads/topic", topic)
	gitURL := testgit.Serve(t, filepath.Join(root, "served")).URL() + "/linux.git"
	srv.Add(t, writeMbox(t, root, "replies2.mbox",
		msg("s1@example.org", sam, report, refs, "#patcheval retest\n#patcheval retest selinux-tax\n"),
		msg("s2@example.org", "Mae Maint <mae@example.org>", report, refs, "#patcheval invalid\n#patcheval bisect\n"),
		msg("s3@example.org", sam, report, refs, "#patcheval test "+srv.URL+"/"+srv.Inbox+"/ttt-v1-0@example.org/\n"+
			"#patcheval test "+gitURL+" topic\n#patcheval test "+gitURL+" no-such\n#patcheval test file:///srv/linux.git topic\n"+
			"#patcheval test git://git.example.org/linux.git\n#patcheval test /etc/passwd\n"),
		msg("s4@example.org", sam, report, refs, "#patcheval retest --per-patch pairs\n#patcheval retest --per-patch\n#patcheval retest --per-patch a b\n")))
	if err := f.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	cmds, _ = st.TriageCommands("test")
	got = nil
	for _, c := range cmds[len(cmds)-13:] {
		got = append(got, c.Command+" "+c.Status+": "+c.Note)
	}
	wantRows = []string{
		fmt.Sprintf("#patcheval retest done: evaluation %d queued again", ev),
		"#patcheval retest selinux-tax done: evaluation 2: the series with pipeline selinux-tax",
		"#patcheval invalid done: report withdrawn (1 Patchwork check(s) set to success \"withdrawn\")",
		fmt.Sprintf("#patcheval bisect done: bisection inside the series of evaluation %d started", ev),
		"#patcheval test " + srv.URL + "/" + srv.Inbox + "/ttt-v1-0@example.org/ done: evaluation 3: \"mm/slab: tidy\" v1 (1 patch(es)) with pipeline ppc-preempt-dynamic",
		fmt.Sprintf("#patcheval test %s topic done: evaluation 4: branch topic of %s, 2 commit(s) on %.12s, with pipeline ppc-preempt-dynamic", gitURL, gitURL, master),
		fmt.Sprintf("#patcheval test %s no-such failed: #patcheval test %s no-such: the remote has no branch \"no-such\" (branches: master, topic)", gitURL, gitURL),
		"#patcheval test file:///srv/linux.git topic failed: #patcheval test file:///srv/linux.git topic: \"file:///srv/linux.git\" is not a git URL: want http://, https:// or git:// and a host",
		"#patcheval test git://git.example.org/linux.git failed: #patcheval test git://git.example.org/linux.git: a git URL needs a branch: #patcheval test <git URL> <branch>",
		"#patcheval test /etc/passwd failed: #patcheval test /etc/passwd: want the lore URL (http or https) or the Message-ID of a series, or a git URL and a branch",
		"#patcheval retest --per-patch pairs done: evaluation 5: the series with pipeline pairs, measured after each patch too",
		"#patcheval retest --per-patch failed: #patcheval retest --per-patch: pipeline ppc-preempt-dynamic: no comparison of a variant without the series against the same kernel with it: nothing to measure patch by patch",
		"#patcheval retest --per-patch a b failed: #patcheval retest --per-patch a b: want [--per-patch] [pipeline]",
	}
	if !reflect.DeepEqual(got, wantRows) {
		t.Errorf("service triage:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(wantRows, "\n  "))
	}
	if len(bisected) != 1 || bisected[0] != ev {
		t.Errorf("bisections started %v, want evaluation %d", bisected, ev)
	}
	// The bisection ends (in the service, later): its result goes to the
	// command's thread; told twice, it is queued once.
	for i := 0; i < 2; i++ {
		if err := triager.BisectResult(ctx, ev, append(requesters, "", "not json"), "patch 1/1 is the first with the kill ns/op regression"); err != nil {
			t.Fatal(err)
		}
	}
	if e3, err := st.Evaluation(3); err != nil || e3.SeriesMsgID != "ttt-v1-0@example.org" || e3.Pipeline != "ppc-preempt-dynamic" {
		t.Errorf("evaluation 3 (#patcheval test): %+v %v", e3, err)
	}
	if in, err := runner.Load(st, 5); err != nil || !in.Options.PerPatch || in.Pipeline.Name != "pairs" {
		t.Errorf("evaluation 5 (#patcheval retest --per-patch pairs): %+v %v", in, err)
	}
	// The branch's evaluation: its two commits as a series on master.
	if in, err := runner.Load(st, 4); err != nil || in.Series == nil || len(in.Series.Patches) != 2 || in.BaseHash != master ||
		in.Series.Title != "branch topic of "+gitURL {
		t.Errorf("evaluation 4 (#patcheval test of a branch): %+v %v", in, err)
	} else if !strings.Contains(string(in.Series.Patches[1].Diff), "+topic 2") {
		t.Errorf("evaluation 4: patch 2/2 diff:\n%s", in.Series.Patches[1].Diff)
	}
	// Its made-up cover answers the command's mail and is named by the
	// branch's tip, not by the second format-patch ran in.
	if e4, err := st.Evaluation(4); err != nil || !strings.HasPrefix(e4.SeriesMsgID, "cover."+topic[:12]+".") {
		t.Errorf("evaluation 4's series Message-ID: %+v %v, want cover.%.12s.*", e4, err, topic)
	}
	if in, err := runner.Load(st, 4); err == nil && in.Series != nil {
		if c := in.Series.Cover; c == nil || c.InReplyTo != "s3@example.org" {
			t.Errorf("evaluation 4's cover letter does not answer the command's mail s3@example.org (cover %v)", c != nil)
			if c != nil {
				t.Errorf("its In-Reply-To: %q", c.InReplyTo)
			}
		}
	}
	if len(rs.reruns) != 1 || rs.reruns[0] != ev {
		t.Errorf("reruns %v", rs.reruns)
	}
	if e2, err := st.Evaluation(2); err != nil || e2.Pipeline != "selinux-tax" {
		t.Errorf("evaluation 2: %+v %v", e2, err)
	}
	posts, _ := st.Posts(0, "", 100)
	var checks, acks, results int
	for _, p := range posts {
		switch {
		case strings.HasPrefix(p.Reporter, "patchwork") && p.State == "success" && strings.Contains(p.Payload, "withdrawn by mae@example.org"):
			checks++
		case strings.HasPrefix(p.Reporter, "mail") && strings.HasPrefix(p.Target, "ack "):
			acks++
			if !strings.Contains(p.Payload, `"in_reply_to":"s`) || !strings.Contains(p.Payload, "patcheval: ") {
				t.Errorf("ack: %s", p.Payload)
			}
		case strings.HasPrefix(p.Reporter, "mail") && strings.HasPrefix(p.Target, "bisect ") && p.Status != store.PostSkipped:
			results++
			if !strings.Contains(p.Payload, `"in_reply_to":"s2@example.org"`) || !strings.Contains(p.Payload, "bisection: patch 1/1 is the first") {
				t.Errorf("bisection result: %s", p.Payload)
			}
		}
	}
	if checks != 1 || acks != 13 || results != 1 {
		t.Errorf("%d withdrawn checks, %d acknowledgements and %d bisection results queued, want 1, 13 and 1", checks, acks, results)
	}
}

// rerunService is runnerService with Rerun (queued again, recorded).
type rerunService struct {
	runnerService
	reruns []int64
}

func (r *rerunService) Rerun(ctx context.Context, id int64) (int64, error) {
	r.reruns = append(r.reruns, id)
	return id, r.st.SetEvaluationStatus(id, "queued")
}

func httpStatus(t *testing.T, u string) int {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
