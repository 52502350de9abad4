package service

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostileMbox is a one-patch series adding a top-level Makefile whose
// every target runs cmd (make syntax) and fails.
func hostileMbox(cmd string) string {
	mk := "%: ; @" + cmd + "; false\n"
	return fmt.Sprintf(`From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001
From: Mallory <mallory@example.org>
Date: Mon, 2 Nov 2026 10:00:00 +0000
Message-ID: <20261102100000.1-1-mallory@example.org>
Subject: [PATCH] build: add a Makefile

A Makefile for everyone.

Signed-off-by: Mallory <mallory@example.org>
---
 Makefile | 1 +
 1 file changed, 1 insertion(+)
 create mode 100644 Makefile

diff --git a/Makefile b/Makefile
new file mode 100644
index 0000000..1111111
--- /dev/null
+++ b/Makefile
@@ -0,0 +1 @@
+%s-- 
2.47.0

`, mk)
}

// TestServeHostileSeriesContained submits the issue-35 series to a real
// service (River on SQLite; a list follower submits the same way): its
// Makefile prints serve's token file and the SMTP password of a process
// holding it in its environment (grep of /proc/*/environ), and writes a
// file beside the token. The build runs sandboxed: the evaluation fails
// with the build's reason, the file is not written, and neither secret
// is in the API's answers, the dashboard's pages or serve's log. With
// PATCHEVAL_SANDBOX=off the token and the password come back through the
// API and the pages (the finding), and the test fails.
func TestServeHostileSeriesContained(t *testing.T) {
	root := t.TempDir()
	tree := gitRepo(t, filepath.Join(root, "linux"))
	state := filepath.Join(root, "state")
	os.MkdirAll(state, 0o700)
	b := make([]byte, 12)
	rand.Read(b)
	tok := "tok-" + hex.EncodeToString(b)
	rand.Read(b)
	password := "smtp-" + hex.EncodeToString(b)
	tokenFile := filepath.Join(state, "token")
	if err := os.WriteFile(tokenFile, []byte(tok+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// serve's sibling holding the password, first in its environment
	// (where the grep finds it).
	holder := exec.Command("sleep", "600")
	holder.Env = append([]string{"PATCHEVAL_SMTP_PASSWORD=" + password}, os.Environ()...)
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { holder.Process.Kill(); holder.Wait() }()
	t.Setenv("PATCHEVAL_SMTP_PASSWORD", password)

	log := &lockedBuffer{}
	s, base := testService(t, Config{AllowTrees: []string{root}, CacheDir: filepath.Join(root, "cache"), Token: []byte(tok), Log: log})
	pwned := filepath.Join(state, "pwned")
	mbox := hostileMbox(fmt.Sprintf(`echo "$$(cat %s) $$(grep -a ^PATCHEVAL_SMTP /proc/*/environ)" >&2; touch %s`, tokenFile, pwned))
	code, _, raw := call(t, "POST", base+"/api/v1/evaluations", tok, SubmitRequest{Mbox: mbox, Pipeline: "ppc-preempt-dynamic",
		Tree: tree, Base: "HEAD", Boots: 1})
	if code != 201 {
		t.Fatalf("submit: %d %s", code, raw)
	}
	var sub SubmitResponse
	json.Unmarshal(raw, &sub)
	id := sub.Evaluation.ID
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(500 * time.Millisecond) {
		e, err := s.Store().Evaluation(id)
		if err == nil && (e.Status == "failed" || e.Status == "done") {
			if e.Status != "failed" {
				t.Fatalf("the hostile series' evaluation %s, want failed", e.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("evaluation %d still %v after 5 minutes", id, e)
		}
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Errorf("the series' Makefile wrote %s", pwned)
	}
	pages := map[string]string{}
	for _, p := range []string{"/api/v1/evaluations/" + fmt.Sprint(id), "/api/v1/evaluations", "/evaluations/" + fmt.Sprint(id), "/",
		"/api/v1/jobs", "/queue"} {
		_, _, body := call(t, "GET", base+p, tok, nil)
		pages[p] = string(body)
	}
	builds, err := s.Store().BuildsOf(id)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, bd := range builds {
		reasons = append(reasons, bd.ErrorText)
		_, _, body := call(t, "GET", fmt.Sprintf("%s/evaluations/%d/builds/%d/log", base, id, bd.ID), tok, nil)
		pages[fmt.Sprintf("build log %d", bd.ID)] = string(body)
	}
	if len(builds) == 0 || !strings.Contains(pages["/api/v1/evaluations/"+fmt.Sprint(id)], "Makefile") {
		t.Errorf("the API does not say why the evaluation failed (builds %d): %s", len(builds), pages["/api/v1/evaluations/"+fmt.Sprint(id)])
	}
	t.Logf("build errors: %q", reasons)
	pages["serve's log"] = log.String()
	for where, text := range pages {
		for name, secret := range map[string]string{"the token": tok, "the SMTP password": password} {
			if strings.Contains(text, secret) {
				t.Errorf("%s is in %s", name, where)
			}
		}
	}
}
