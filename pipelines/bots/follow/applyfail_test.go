package follow

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/internal/testsmtp"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
	"github.com/patcheval/patcheval/pipelines/bots/reporters"
	"github.com/patcheval/patcheval/pipelines/service"
	"github.com/patcheval/patcheval/pipelines/store"
)

// TestApplyFailureStoredAndReported: a followed list's new series arrives
// in a real public-inbox; the follower submits it to a real service
// (River jobs on SQLite), whose apply stage applies it to a small real
// git tree with a MAINTAINERS file. Patch 2/2 does not apply there (its
// file has other lines). The failure is stored with the evaluation
// (patch, file, hunk, reason, base), patch 2/2's Patchwork check fails
// saying so in one line, patch 1/2's is a warning that the series was
// not evaluated, and the held reply to patch 2/2 shows the hunk, what the
// file has, and the base. Approved, it goes over SMTP into the same
// public-inbox, in reply to patch 2/2.
func TestApplyFailureStoredAndReported(t *testing.T) {
	g := &gen{t0: time.Now().Add(-time.Hour)}
	dir := t.TempDir()
	ppc := []string{"arch/powerpc/kernel/time.c", "arch/powerpc/include/asm/time.h"}
	seed := writeMbox(t, dir, "seed.mbox", g.series("old", "Old Timer <old@example.org>", "powerpc: old work", 1, 1, ppc, "")...)
	inbox := testinbox.StartWith(t, testinbox.Options{Bulk: true, NoAll: true}, seed)

	// The tree: time.c has the line patch 1 expects, time.h does not.
	tree := filepath.Join(dir, "trees", "linux")
	files := map[string]string{
		"arch/powerpc/kernel/time.c":      "line\n",
		"arch/powerpc/include/asm/time.h": "#ifndef _ASM_TIME_H\n#define _ASM_TIME_H\n#endif\n",
		"MAINTAINERS":                     "POWERPC\nM:\tMichael Maintainer <mm@example.org>\nL:\ttest@example.org\nF:\tarch/powerpc/\n",
	}
	for name, text := range files {
		os.MkdirAll(filepath.Dir(filepath.Join(tree, name)), 0o755)
		if err := os.WriteFile(filepath.Join(tree, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "master", tree}, {"-C", tree, "add", "."},
		{"-C", tree, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "powerpc: the base"}} {
		if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	head, err := exec.Command("git", "-C", tree, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	base := strings.TrimSpace(string(head))

	l := List{Name: "test", URL: inbox.URL + "/" + inbox.Inbox, Pipeline: "ppc-preempt-dynamic", Paths: []string{"arch/powerpc/**"},
		Tree: tree, IncompleteAfter: time.Minute, Poll: 200 * time.Millisecond,
		Patchwork: &PatchworkConfig{URL: "http://127.0.0.1:1", TokenFile: tokenFile(t)},
		Mail:      &MailConfig{Mode: reporters.MailModerated, Archive: inbox.URL + "/" + inbox.Inbox}}
	smtpSrv := testsmtp.Start(t, testsmtp.Options{Deliver: inbox.AddMessage})
	rep, err := NewReporting(nil, []List{l}, &mail.SMTPSettings{Host: smtpSrv.Host, Port: smtpSrv.Port, Security: "none",
		Timeout: 2 * time.Minute}, "https://ci.example.org", func(int64) string { return filepath.Join(dir, "out") }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan *Follower, 1)
	cfg := service.Config{Database: filepath.Join(dir, "patcheval.db"), CacheDir: filepath.Join(dir, "cache"),
		AllowTrees: []string{filepath.Join(dir, "trees")}, From: mbox.Address{Name: "Patch Bot", Email: "bot@example.com"},
		Log: testLog{t}, Notify: rep.Notify,
		Loops: []service.Loop{{Name: "follow", Run: func(ctx context.Context, s *service.Service) error {
			f := &Follower{Store: s.Store(), Lists: []List{l}, Submit: ServiceSubmitter{Service: s}, Dir: filepath.Join(dir, "mirrors")}
			started <- f
			return f.Run(ctx)
		}}}}
	svc, err := service.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st := svc.Store()
	rep.Store, rep.Outbox.Store = st, st
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("service: %v", err)
		}
		svc.Close()
	}()
	<-started
	waitFor(t, "the follower's first poll", 60*time.Second, func() bool {
		ls, _ := st.FollowListState("test")
		return ls != nil && ls.LastCommit != ""
	})

	inbox.Add(t, writeMbox(t, dir, "new.mbox", g.series("aaa", "Ann Dev <ann@example.org>", "powerpc/time: faster decrementer", 1, 2, ppc, "")...))
	var ev *store.Evaluation
	waitFor(t, "aaa v1 evaluated and failed", 120*time.Second, func() bool {
		s := seriesBy(t, st)["aaa v1"]
		if s == nil || s.EvaluationID == 0 {
			return false
		}
		ev, _ = st.Evaluation(s.EvaluationID)
		return ev != nil && ev.Status == "failed"
	})

	af, err := st.ApplyFailureOf(ev.ID)
	if err != nil || af == nil {
		t.Fatalf("apply failure of evaluation %d: %+v %v", ev.ID, af, err)
	}
	if af.Patch != 2 || af.Total != 2 || af.Applied != 1 || af.Label != "2/2 powerpc/time: faster decrementer: part 2" ||
		af.MessageID != "aaa-v1-2@example.org" || af.File != "arch/powerpc/include/asm/time.h" || af.Hunk != 1 ||
		af.HunkHeader != "@@ -1,1 +1,2 @@" || af.Base != base || af.BaseSubject != "powerpc: the base" ||
		af.BaseReason != "--base HEAD" || af.Tree != tree || af.ErrorKind != "failed" ||
		!strings.Contains(af.Reason, "the patch expects:\n    |line") || !strings.Contains(af.Reason, "|#ifndef _ASM_TIME_H") {
		t.Errorf("stored failure: %+v", af)
	}
	wantLine := "patch 2/2 does not apply to " + base[:12] + ` ("powerpc: the base"): arch/powerpc/include/asm/time.h: hunk #1 @@ -1,1 +1,2 @@ does not apply at line 1 or anywhere near`
	if got := af.Summary(); got != wantLine {
		t.Errorf("summary\n%s\nwant\n%s", got, wantLine)
	}

	// The posts the "failed" notify job queued.
	var checks map[string]reporters.PatchworkCheck
	var reply *store.Post
	waitFor(t, "the failed evaluation's posts", 60*time.Second, func() bool {
		ps, err := st.Posts(ev.ID, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		checks, reply = map[string]reporters.PatchworkCheck{}, nil
		for _, p := range ps {
			switch {
			case reporters.IsMail(p):
				reply = p
			case p.State != reporters.CheckPending:
				var c reporters.PatchworkCheck
				json.Unmarshal([]byte(p.Payload), &c)
				checks[strings.Fields(p.Target)[0]] = c
			}
		}
		return len(checks) == 2 && reply != nil
	})
	if c := checks["aaa-v1-2@example.org"]; c.State != reporters.CheckFail || c.Description != wantLine {
		t.Errorf("patch 2/2's check: %+v", c)
	}
	if c := checks["aaa-v1-1@example.org"]; c.State != reporters.CheckWarning || c.Description != "not evaluated: "+wantLine {
		t.Errorf("patch 1/2's check: %+v", c)
	}
	if reply.Status != store.PostHeld {
		t.Errorf("the reply is %s, want held for approval", reply.Status)
	}
	var d report.Draft
	if err := json.Unmarshal([]byte(reply.Payload), &d); err != nil {
		t.Fatal(err)
	}
	var to, cc []string
	for _, a := range d.To {
		to = append(to, a.Email)
	}
	for _, a := range d.Cc {
		cc = append(cc, a.Email)
	}
	if d.InReplyTo != "aaa-v1-2@example.org" || d.Subject != "Re: [PATCH 2/2] powerpc/time: faster decrementer: part 2" ||
		strings.Join(to, ",") != "ann@example.org" || strings.Join(cc, ",") != "test@example.org,mm@example.org" || d.TestedBy {
		t.Errorf("reply headers: to %v cc %v %+v", to, cc, d)
	}
	for _, want := range []string{
		"Patch 2/2 (\"powerpc/time: faster decrementer: part 2\") does not apply to\n" + base[:12] + ` ("powerpc: the base")`,
		"this\nseries:\n\n  arch/powerpc/include/asm/time.h:\n  hunk #1 @@ -1,1 +1,2 @@ does not apply at line 1 or anywhere near\n",
		"\n    the patch expects:\n      |line\n    the file has at line 1:\n      |#ifndef _ASM_TIME_H\n      |#define _ASM_TIME_H\n      |#endif\n\n",
		"The patch before it applied. The base was " + base[:12] + ` ("powerpc: the` + "\nbase\"), chosen as: --base HEAD.\n",
		"git format-patch --base",
	} {
		if !strings.Contains(d.Body, want) {
			t.Errorf("the reply lacks %q:\n%s", want, d.Body)
		}
	}
	if strings.Contains(d.Body, "Tested-by") {
		t.Errorf("a reply about a series that did not apply carries a Tested-by:\n%s", d.Body)
	}

	// The dashboard's page of the evaluation says it too.
	resp, err := http.Get(fmt.Sprintf("http://%s/evaluations/%d", ln.Addr(), ev.ID))
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	text := html.UnescapeString(string(page))
	for _, want := range []string{"The series does not apply", wantLine, "|#ifndef _ASM_TIME_H", "chosen as: --base HEAD"} {
		if !strings.Contains(text, want) {
			t.Errorf("the evaluation's page (%d) lacks %q", resp.StatusCode, want)
		}
	}

	// Approved, it reaches the list in the thread.
	rep.Outbox.Reporters = []reporters.Reporter{rep.lists["test"].mail}
	if err := reporters.ApproveMail(st, reply.ID); err != nil {
		t.Fatal(err)
	}
	if n, err := rep.Outbox.Flush(ctx); err != nil || n != 1 {
		p, _ := st.Post(reply.ID)
		t.Fatalf("flush: %d sent, %v (post %+v)", n, err, p)
	}
	waitFor(t, "the reply on the list", 60*time.Second, func() bool {
		resp, err := http.Get(inbox.URL + "/" + inbox.Inbox + "/" + d.MessageID + "/raw")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	})
}

type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
