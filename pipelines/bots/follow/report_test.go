package follow

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/testsmtp"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/bots/mail"
	"github.com/patcheval/patcheval/pipelines/bots/reporters"
	"github.com/patcheval/patcheval/pipelines/store"
)

func TestLoadConfigReporterTables(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "config.toml")
	os.WriteFile(file, []byte(`
[[list]]
url = "https://lore.kernel.org/linuxppc-dev"
pipeline = "p"
[list.patchwork]
url = "https://patchwork.ozlabs.org"
project = "linuxppc-dev"
token_file = "/etc/pw.token"
[list.github]
repo = "owner/linux"
token_file = "/etc/gh.token"
app = true
[list.mail]
`), 0o644)
	ls, err := LoadConfig(file, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := ls[0]
	if l.Patchwork == nil || l.Patchwork.Project != "linuxppc-dev" || l.GitHub == nil || !l.GitHub.App || l.GitHub.Repo != "owner/linux" ||
		l.Mail == nil || l.Mail.Mode != "moderated" || l.Mail.Archive != "https://lore.kernel.org/linuxppc-dev" {
		t.Errorf("reporters: %+v %+v %+v", l.Patchwork, l.GitHub, l.Mail)
	}
	os.WriteFile(file, []byte("[[list]]\nurl = \"https://lore.kernel.org/a\"\npipeline = \"p\"\n[list.github]\nrepo = \"o/r\"\n"+
		"app_id = 123456\ninstallation_id = 7890\nprivate_key_file = \"/etc/app.pem\"\n"), 0o644)
	if ls, err := LoadConfig(file, nil); err != nil || ls[0].GitHub.AppID != "123456" || ls[0].GitHub.InstallationID != 7890 ||
		ls[0].GitHub.PrivateKeyFile != "/etc/app.pem" {
		t.Errorf("a GitHub App table: %+v %v", ls, err)
	}
	for _, tc := range []struct{ table, want string }{
		{"[list.patchwork]\nurl = \"patchwork.ozlabs.org\"\ntoken_file = \"/t\"", `[list.patchwork] url "patchwork.ozlabs.org"`},
		{"[list.patchwork]\nurl = \"https://pw.example.org\"", "[list.patchwork] token_file: missing"},
		{"[list.patchwork]\nurl = \"https://pw.example.org\"\ntoken = \"s3cret\"", `[list.patchwork] has no key "token"`},
		{"[list.github]\nrepo = \"linux\"\ntoken_file = \"/t\"", `[list.github] repo "linux": want owner/name`},
		{"[list.github]\nrepo = \"o/r\"\ntoken_file = \"/t\"\nmirror = \"https://u:pw@github.com/o/r.git\"", "without credentials"},
		{"[list.github]\nrepo = \"o/r\"\ntoken_file = \"/t\"\napp_id = 1\ninstallation_id = 2\nprivate_key_file = \"/k\"", "a token or a GitHub App, not both"},
		{"[list.github]\nrepo = \"o/r\"\napp_id = 1\nprivate_key_file = \"/k\"", "a GitHub App needs app_id, installation_id (positive) and private_key_file"},
		{"[list.github]\nrepo = \"o/r\"\napp_id = 1.5\ninstallation_id = 2\nprivate_key_file = \"/k\"", "app_id: want the App's client ID or app ID"},
		{"[list.mail]\nmode = \"yolo\"", `[list.mail] mode "yolo"`},
		{"[list.jenkins]\nurl = \"https://ci\"", `[list] has no table "jenkins`},
	} {
		os.WriteFile(file, []byte("[[list]]\nurl = \"https://lore.kernel.org/a\"\npipeline = \"p\"\n"+tc.table+"\n"), 0o644)
		_, err := LoadConfig(file, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: error %v, want it to name the file and %q", tc.table, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows a secret: %v", err)
		}
	}
}

// notifyFixture is a store where list "ppc" followed a two-patch series
// and the service evaluated it: the messages, the follow_series row, the
// evaluation (status done, applied as a branch) and its outputs
// (report.json with a +25% regression, reply.json).
func notifyFixture(t *testing.T) (st *store.Store, evalID int64, outDir string, patches []string) {
	t.Helper()
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := &gen{t0: time.Now().Add(-time.Hour)}
	msgs := g.series("s1", "Ann Author <ann@example.org>", "powerpc: faster timers", 1, 2, []string{"arch/powerpc/kernel/time.c"}, "")
	var fm []store.FollowMessage
	for _, raw := range msgs {
		m, err := mbox.ParseMessage(raw, "ppc")
		if err != nil {
			t.Fatal(err)
		}
		fm = append(fm, store.FollowMessage{MsgID: m.MessageID, Root: "s1-v1-0@example.org", Raw: raw})
	}
	if err := st.AddFollowMessages("ppc", fm); err != nil {
		t.Fatal(err)
	}
	ev, _, err := st.CreateOrResumeEvaluation("k1", store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic", SeriesMsgID: "s1-v1-1@example.org", SeriesVersion: 1})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := st.NoteFollowSeries(store.FollowSeries{List: "ppc", Root: "s1-v1-0@example.org", Version: 1, MsgID: "s1-v1-1@example.org",
		Title: "powerpc: faster timers", Author: "ann@example.org", Total: 2, Found: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SetFollowSeries(fs.ID, store.SeriesSubmitted, "", ev.ID); err != nil {
		t.Fatal(err)
	}
	outDir = filepath.Join(dir, "out")
	os.MkdirAll(outDir, 0o755)
	var samples []evaluate.Sample
	for b := 0; b < 5; b++ {
		for it := 0; it < 5; it++ {
			w := math.Sin(float64(b*7+it)) * 2
			samples = append(samples,
				evaluate.Sample{Variant: "base", Boot: b, Iteration: it, Benchmark: "kill", Metric: "ns/op", Unit: "ns", Value: 1000 + w},
				evaluate.Sample{Variant: "patched", Boot: b, Iteration: it, Benchmark: "kill", Metric: "ns/op", Unit: "ns", Value: 1250 + w})
		}
	}
	r := &report.Report{Title: "ppc-preempt-dynamic", Variants: []report.Variant{{Name: "base", Boots: 5}, {Name: "patched", Boots: 5}}}
	if err := r.AddResults(samples, report.Spec{Comparisons: []report.Pair{{Base: "base", Other: "patched"}}}); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(filepath.Join(outDir, "report.json"))
	report.WriteJSON(f, r)
	f.Close()
	os.WriteFile(filepath.Join(outDir, "report.md"), []byte("## patcheval\n\nkill regressed\n"), 0o644)
	d := report.Draft{From: mbox.Address{Name: "Bot", Email: "bot@example.com"}, To: []mbox.Address{{Email: "ann@example.org"}},
		Subject: "Re: [PATCH 0/2] powerpc: faster timers", InReplyTo: "s1-v1-0@example.org", References: []string{"s1-v1-0@example.org"},
		Body: "kill ns/op: base -> patched +25%: regression\n", MessageID: "reply-1@example.com", Date: time.Now()}
	b, _ := json.Marshal(d)
	os.WriteFile(filepath.Join(outDir, "reply.json"), b, 0o644)
	if err := st.Tx(context.Background(), func(tx *store.Tx) error {
		return st.RecordAppliedTx(tx, ev.ID, store.Applied{Head: strings.Repeat("ab", 20), Tree: "/srv/linux.git", Branch: "patcheval/ppc/s1-v1"})
	}); err != nil {
		t.Fatal(err)
	}
	return st, ev.ID, outDir, []string{"s1-v1-1@example.org", "s1-v1-2@example.org"}
}

func tokenFile(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "token")
	os.WriteFile(p, []byte("tok-123\n"), 0o600)
	return p
}

// Notify queues, per followed list, what its reporters post: pending
// checks on every patch when queued, then the verdict (a regression is a
// warning), the GitHub push/status/comment, and the reply mail held for
// approval; again is a no-op. An evaluation no list submitted, and a
// list without reporters, post nothing.
func TestReportingNotifyQueuesEachReportersPosts(t *testing.T) {
	st, id, out, patches := notifyFixture(t)
	lists := []List{{Name: "ppc", URL: "https://lore.example.org/ppc", Pipeline: "ppc-preempt-dynamic",
		Patchwork: &PatchworkConfig{URL: "https://pw.example.org", TokenFile: tokenFile(t)},
		GitHub:    &GitHubConfig{Repo: "o/linux", TokenFile: tokenFile(t)},
		Mail:      &MailConfig{Mode: "moderated", Archive: "https://lore.example.org/ppc"}}}
	if _, err := NewReporting(st, lists, nil, "http://x", nil, nil); err == nil || !strings.Contains(err.Error(), "[smtp]") {
		t.Fatalf("mail without [smtp]: %v", err)
	}
	bad := append([]List(nil), lists...)
	bad[0].Patchwork = &PatchworkConfig{URL: "https://pw.example.org", TokenFile: "/nonexistent/token"}
	if _, err := NewReporting(st, bad, &mail.SMTPSettings{Host: "127.0.0.1"}, "", nil, nil); err == nil ||
		!strings.Contains(err.Error(), "ppc") || !strings.Contains(err.Error(), "/nonexistent/token") {
		t.Fatalf("unreadable token file: %v", err)
	}
	rep, err := NewReporting(st, lists, &mail.SMTPSettings{Host: "127.0.0.1"}, "https://ci.example.org/", func(int64) string { return out }, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := rep.Notify(ctx, id, EventQueued); err != nil {
		t.Fatal(err)
	}
	if err := rep.Notify(ctx, id, EventDone); err != nil {
		t.Fatal(err)
	}
	posts := func() map[string]*store.Post {
		ps, err := st.Posts(id, "", 100)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*store.Post{}
		for _, p := range ps {
			k := p.Reporter + " " + p.Target + " " + p.State
			if m[k] == nil {
				m[k] = p
			}
		}
		return m
	}
	got := posts()
	for _, m := range patches {
		pend := got["patchwork/ppc "+m+" patcheval-ppc-preempt-dynamic pending"]
		final := got["patchwork/ppc "+m+" patcheval-ppc-preempt-dynamic warning"]
		if pend == nil || final == nil || pend.Status != store.PostQueued || final.Status != store.PostQueued {
			t.Fatalf("checks of %s: %+v %+v (all: %v)", m, pend, final, keys(got))
		}
		var c reporters.PatchworkCheck
		json.Unmarshal([]byte(final.Payload), &c)
		if !strings.HasPrefix(c.Description, "regression: kill ns/op: base -> patched +25") || c.TargetURL != "https://ci.example.org/evaluations/"+strconv.FormatInt(id, 10) {
			t.Errorf("check: %+v", c)
		}
	}
	sha := strings.Repeat("ab", 20)
	for _, k := range []string{"github/ppc push patcheval/ppc/s1-v1 ", "github/ppc status " + sha + " patcheval-ppc-preempt-dynamic failure",
		"github/ppc comment " + sha + " patcheval-ppc-preempt-dynamic failure"} {
		if got[k] == nil {
			t.Errorf("no post %q (all: %v)", k, keys(got))
		}
	}
	m := got["mail/ppc s1-v1-0@example.org ppc-preempt-dynamic "]
	if m == nil || m.Status != store.PostHeld {
		t.Fatalf("reply mail: %+v (all: %v)", m, keys(got))
	}
	first, _ := st.Posts(id, "", 100)
	if len(first) != 8 {
		t.Errorf("%d posts, want 8 (2 pending + 2 final checks, push, status, comment, mail)", len(first))
	}
	// Again (a retried notify job): nothing new to send.
	rep.Notify(ctx, id, EventDone)
	rep.Notify(ctx, id, EventQueued)
	ps, _ := st.Posts(id, "", 100)
	if len(ps) != 16 {
		t.Errorf("repeated notify: %d posts, want 8 more (all skipped)", len(ps))
	}
	for _, p := range ps[:len(ps)-len(first)] {
		if p.Status != store.PostSkipped {
			t.Errorf("repeated notify queued %s %s as %s", p.Reporter, p.Target, p.Status)
		}
	}
	// Approving the held reply sends it at once through the running
	// outbox (Kick), over SMTP.
	srv := testsmtp.Start(t, testsmtp.Options{})
	rep.lists["ppc"].mail.SMTP = mail.SMTPSettings{Host: srv.Host, Port: srv.Port, Security: "none", Timeout: 10 * time.Second}
	rep.Outbox.Reporters = []reporters.Reporter{rep.lists["ppc"].mail}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go rep.Outbox.Run(runCtx, time.Hour)
	if err := rep.Approve(ctx, got["patchwork/ppc "+patches[0]+" patcheval-ppc-preempt-dynamic pending"].ID); err == nil {
		t.Error("approving a Patchwork check")
	}
	if err := rep.Approve(ctx, m.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the approved mail sent", 10*time.Second, func() bool { p, _ := st.Post(m.ID); return p.Status == store.PostSent })
	if ids := srv.MessageIDs(); len(ids) != 1 || ids[0] != "reply-1@example.com" {
		t.Errorf("SMTP got %v", ids)
	}

	// An evaluation that no followed list submitted.
	other, _, _ := st.CreateOrResumeEvaluation("k2", store.EvaluationMeta{Pipeline: "p"})
	before, _ := st.Posts(0, "", 1000)
	if err := rep.Notify(ctx, other.ID, EventDone); err != nil {
		t.Fatal(err)
	}
	if after, _ := st.Posts(0, "", 1000); len(after) != len(before) {
		t.Errorf("an evaluation from elsewhere got %d posts", len(after)-len(before))
	}
}

func keys(m map[string]*store.Post) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// A [list.github] table with app_id makes a GitHub App reporter (check
// runs); a key file that is no key is bad input naming the list and the
// file.
func TestReportingGitHubApp(t *testing.T) {
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "app.pem")
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	l := List{Name: "ppc", URL: "https://lore.example.org/ppc", Pipeline: "p",
		GitHub: &GitHubConfig{Repo: "o/linux", AppID: "123456", InstallationID: 7, PrivateKeyFile: keyFile}}
	rep, err := NewReporting(nil, []List{l}, nil, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if gh := rep.lists["ppc"].gh; gh == nil || !gh.App {
		t.Errorf("reporter %+v, want a GitHub App's", gh)
	}
	os.WriteFile(keyFile, []byte("not a key\n"), 0o600)
	if _, err := NewReporting(nil, []List{l}, nil, "", nil, nil); err == nil || !strings.Contains(err.Error(), "ppc") ||
		!strings.Contains(err.Error(), keyFile) || strings.Contains(err.Error(), "not a key") {
		t.Errorf("bad key file: %v", err)
	}
}
