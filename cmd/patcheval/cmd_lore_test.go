package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/patcheval/patcheval/internal/testenv"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
)

func loreCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb, Stdin: strings.NewReader(stdin)}, append([]string{"lore"}, args...))
	return out.String(), errb.String(), code
}

var backport = testenv.BackportMbox()

func TestLoreFile(t *testing.T) {
	dir := t.TempDir()
	out, errs, code := loreCLI(t, "", "-m", backport, "--am-out", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	path := filepath.Join(dir, "v4_20261102_tester_powerpc_enable_dynamic_preemption_v6_1_backport.mbx")
	for _, want := range []string{"Series:   powerpc: Enable dynamic preemption (v6.1 backport)", "Version:  v4", "base-commit b3bb56f2e4c9f033ed84c82906c3c2755787ffea", "[1/1] powerpc: enable dynamic preemption", path} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	am, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(am), "Link: https://patch.msgid.link/20261102093000.4121-1-tester@example.org\n---\n") {
		t.Errorf("am mbox: %v\n%s", err, am)
	}
	// --link-mask "" drops the Link:; -m - reads stdin; --json is the Series.
	data, _ := os.ReadFile(backport)
	out, errs, code = loreCLI(t, string(data), "-m", "-", "--json", "--link-mask", "", "--am-out", dir)
	if code != 0 {
		t.Fatalf("stdin: exit %d: %s", code, errs)
	}
	var s struct {
		Version int `json:"version"`
		Patches []struct {
			MessageID string `json:"message_id"`
		} `json:"patches"`
	}
	if err := json.Unmarshal([]byte(out), &s); err != nil || s.Version != 4 || len(s.Patches) != 1 {
		t.Errorf("json: %v %+v\n%s", err, s, out)
	}
	if !strings.Contains(errs, path) {
		t.Errorf("with --json the am path goes to stderr: %q", errs)
	}
	am, _ = os.ReadFile(path)
	if strings.Contains(string(am), "Link:") {
		t.Errorf("--link-mask '' still wrote a Link:")
	}
}

func TestLoreBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no thread given"},
		{[]string{"-m", filepath.Join(testenv.ThreadsDir(), "generic-entry-v5-report.mbox")}, "no patches in the thread"},
		{[]string{"-m", "/nonexistent/x.mbox"}, "/nonexistent/x.mbox"},
		{[]string{"-m", backport, "x@y"}, "no message <x@y> in it"},
		{[]string{"-m", backport, "x@y", "z@y"}, "at most one Message-ID"},
		{[]string{"-m", backport, "not-an-id"}, "must be a Message-ID"},
		{[]string{"-m", backport, "-v", "3"}, "no v3 patches"},
		{[]string{"not a msgid"}, "not a Message-ID"},
		// Config comparisons only (every variant has the series): caught
		// before the evaluation, not after it.
		{[]string{"-m", backport, "--pipeline", "ppc-preempt-dynamic", "--per-patch", "--tree", "/nonexistent/linux.git"},
			"--per-patch: pipeline ppc-preempt-dynamic: no comparison of a variant without the series"},
		{[]string{"-m", backport, "--pipeline", "ppc-preempt-dynamic", "--tree", "/nonexistent/linux.git", "--from", "A <a@example.org>",
			"--thread-numbers", "/nonexistent/v4.mbox"}, "--thread-numbers /nonexistent/v4.mbox: open /nonexistent/v4.mbox"},
	} {
		_, errs, code := loreCLI(t, "", c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("lore %q: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
		}
	}
}

// TestLoreFetch goes through a real public-inbox-httpd like lore.
func TestLoreFetch(t *testing.T) {
	testenv.SkipIfSlow(t, "public-inbox")
	srv := testinbox.Start(t, backport)
	t.Setenv("PATCHEVAL_CACHE_DIR", t.TempDir())
	dir := t.TempDir()
	out, errs, code := loreCLI(t, "", "--lore", srv.URL, "--no-cache", "--am-out", dir, "20261102093000.4121-1-tester@example.org")
	if code != 0 || !strings.Contains(out, "[1/1] powerpc: enable dynamic preemption") || !strings.Contains(out, ".mbx") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	// A lore URL works too, and PATCHEVAL_LORE is the default base.
	t.Setenv("PATCHEVAL_LORE", srv.URL)
	if _, errs, code := loreCLI(t, "", "--no-cache", srv.URL+"/test/20261102093000.4121-0-tester@example.org/"); code != 0 {
		t.Fatalf("lore URL: exit %d: %s", code, errs)
	}
	if _, errs, code := loreCLI(t, "", "--no-cache", "unknown-msgid@example.org"); code != 2 {
		t.Errorf("unknown msgid: exit %d, want 2: %s", code, errs)
	}
	// Server down: infrastructure, exit 3.
	srv.Close()
	if _, errs, code := loreCLI(t, "", "--no-cache", "--lore", srv.URL, "20261102093000.4121-0-tester@example.org"); code != 3 {
		t.Errorf("server down: exit %d, want 3: %s", code, errs)
	}
}

// lore --json prints one document however many steps run: the Series, with
// the steps' results as extra keys; a step that fails does not take the
// resolved series with it.
func TestLoreJSONIsOneDocument(t *testing.T) {
	// A git repository without the pipeline's base: the step fails
	// after the series is resolved.
	repo := filepath.Join(t.TempDir(), "empty.git")
	if out, err := exec.Command("git", "init", "-q", "--bare", repo).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	out, errs, code := loreCLI(t, "", "-m", backport, "--json", "--pipeline", "ppc-preempt-dynamic", "--tree", repo)
	if code == 0 {
		t.Fatalf("a missing tree exited 0:\n%s", errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("stdout holds more than one JSON document:\n%s", out)
	}
	if doc["Subject"] == nil && doc["subject"] == nil && doc["Title"] == nil && doc["title"] == nil {
		t.Errorf("the document is not the series: keys %v", keys(doc))
	}

	var b bytes.Buffer
	_, s, err := (&loreFlags{file: backport}).resolve(context.Background(), &Env{Stderr: &b}, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := writeLoreJSON(&b, &loreResult{Series: s, Extra: map[string]any{"evaluation": map[string]int{"evaluation_id": 7}}}); err != nil {
		t.Fatal(err)
	}
	var both map[string]json.RawMessage
	dec = json.NewDecoder(&b)
	if err := dec.Decode(&both); err != nil || dec.More() {
		t.Fatalf("combined document: %v, more=%v", err, dec.More())
	}
	var ev bytes.Buffer
	json.Compact(&ev, both["evaluation"])
	if ev.String() != `{"evaluation_id":7}` || len(both) < 3 {
		t.Errorf("combined document keys %v, evaluation %s", len(both), both["evaluation"])
	}
}

func keys(m map[string]any) []string {
	var k []string
	for x := range m {
		k = append(k, x)
	}
	return k
}

// lore -m FILE MSGID picks that message's thread out of an mbox holding
// several (like b4 am -m FILE MSGID); without MSGID both threads are read.
func TestLoreMboxWithMsgID(t *testing.T) {
	a, err := os.ReadFile(backport)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile("../../series/testdata/shape-rfc.mbox")
	if err != nil {
		t.Fatal(err)
	}
	mixed := filepath.Join(t.TempDir(), "mixed.mbox")
	if err := os.WriteFile(mixed, append(append(a, '\n'), b...), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := loreCLI(t, "", "-m", mixed, "rfc-1@example.org")
	if code != 0 || !strings.Contains(out, "Series:   shapes: an idea") || strings.Contains(out, "powerpc") || !strings.Contains(out, "took the") {
		t.Errorf("rfc thread: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = loreCLI(t, "", "-m", mixed, "<20261102093000.4121-1-tester@example.org>")
	if code != 0 || !strings.Contains(out, "[1/1] powerpc: enable dynamic preemption") || strings.Contains(out, "shapes") {
		t.Errorf("backport thread: exit %d\n%s%s", code, out, errs)
	}
	// From stdin too.
	data, _ := os.ReadFile(mixed)
	if out, errs, code = loreCLI(t, string(data), "-m", "-", "rfc-1@example.org"); code != 0 || !strings.Contains(out, "shapes: an idea") {
		t.Errorf("stdin: exit %d\n%s%s", code, out, errs)
	}
	// And from a maildir holding both threads.
	msgs, err := mbox.ParseBytes(data, "mixed.mbox")
	if err != nil {
		t.Fatal(err)
	}
	md := filepath.Join(t.TempDir(), "Mail")
	for _, d := range []string{"cur", "new", "tmp"} {
		os.MkdirAll(filepath.Join(md, d), 0o755)
	}
	for i, m := range msgs {
		if err := os.WriteFile(filepath.Join(md, "cur", fmt.Sprintf("%d.patcheval:2,S", i)), m.Raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, errs, code = loreCLI(t, "", "-m", md, "rfc-1@example.org"); code != 0 || !strings.Contains(out, "Series:   shapes: an idea") || strings.Contains(out, "powerpc") ||
		!strings.Contains(out, fmt.Sprintf("holds %d messages", len(msgs))) {
		t.Errorf("maildir: exit %d\n%s%s", code, out, errs)
	}
}

// apply refuses an incomplete series (exit 2) before touching the tree;
// lore shows it and writes what was found.
func TestApplyIncompleteSeries(t *testing.T) {
	var out, errb strings.Builder
	tree := t.TempDir()
	code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"apply", "--tree", tree, "-m", "../../series/testdata/shape-missing.mbox"})
	if code != 2 || !strings.Contains(errb.String(), "is incomplete (missing patches [2]): not applying it") {
		t.Errorf("apply: exit %d\n%s", code, errb.String())
	}
	dir := t.TempDir()
	o, e, code := loreCLI(t, "", "-m", "../../series/testdata/shape-missing.mbox", "--am-out", dir)
	if code != 0 || !strings.Contains(o, "[2/3] MISSING") || !strings.Contains(e, "warning: the series is incomplete (missing [2])") {
		t.Errorf("lore: exit %d\n%s%s", code, o, e)
	}
}

// lore prints mail text with its control characters escaped: a subject,
// a name, a trailer or a binary body with ESC, OSC, C1 CSI, CR or bytes
// that are not UTF-8 must not reach the terminal raw (they retitle it,
// clear it, or overwrite a line); -m on a binary file neither.
func TestLoreEscapesMailText(t *testing.T) {
	dir := t.TempDir()
	bin := make([]byte, 4096)
	for i := range bin {
		bin[i] = byte(i * 7)
	}
	hostile := "From: Eve \x1b]0;PWNED\x07 <eve@example.org>\nSubject: [PATCH] x\x1b[2J: clear\r\xc2\x9b31m\nMessage-ID: <1@x>\nDate: Mon, 5 Jan 2026 10:00:00 +0000\n\n" +
		"body\x1b[1;1H\n\nSigned-off-by: Eve \x1b]0;T\x07 <eve@example.org>\n---\ndiff --git a/f b/f\n--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n" +
		"\nFrom mboxrd@z Thu Jan  1 00:00:00 1970\nFrom: R <r@example.org>\nSubject: Re: [PATCH] x\nMessage-ID: <2@x>\nIn-Reply-To: <1@x>\nDate: Mon, 5 Jan 2026 11:00:00 +0000\n\nReviewed-by: \x1b[31mR\x1b[0m <r@example.org>\n"
	files := map[string][]byte{
		"hostile.mbox": []byte(hostile),
		"binary.mbox":  append([]byte("From: a <a@b.c>\nSubject: [PATCH] bin\x00\x1b\xff\nMessage-ID: <3@x>\n\n"), bin...),
		"elf":          append([]byte("\x7fELF\x02\x01\x01\x1b]0;x\x07\n"), bin...),
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		out, errs, code := loreCLI(t, "", "-m", p)
		for what, text := range map[string]string{"stdout": out, "stderr": errs} {
			for _, bad := range []string{"\x1b", "\x07", "\r", "\x00", "\u009b"} {
				if strings.Contains(text, bad) {
					t.Errorf("lore -m %s (exit %d): %s has %q:\n%q", name, code, what, bad, text)
				}
			}
			if !utf8.ValidString(text) {
				t.Errorf("lore -m %s: %s is not UTF-8: %q", name, what, text)
			}
		}
		if name == "hostile.mbox" && (code != 0 || !strings.Contains(out, `\x1b[2J`) || !strings.Contains(out, `\x1b]0;PWNED\x07`)) {
			t.Errorf("hostile: exit %d, the escapes are not shown readable:\n%s%s", code, out, errs)
		}
	}
}
