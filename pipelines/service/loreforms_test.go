package service

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/pipelines/store"
)

// serve --lore takes every form lore --lore takes (the server's base, its
// all index, a list, a message URL) against a real public-inbox: a
// Message-ID and a URL on the same server (whatever list it names) are
// fetched, a URL on another server is refused, and the dashboard's links
// go to the list or the all index, never ".../all/all/".
func TestServeLoreForms(t *testing.T) {
	inbox := testinbox.StartWith(t, testinbox.Options{Bulk: true}, backport)
	const msgid = "20261102093000.4121-0-tester@example.org"
	tree := gitRepo(t, filepath.Join(t.TempDir(), "linux"))
	list := inbox.URL + "/" + inbox.Inbox
	for _, c := range []struct{ name, lore, link string }{
		{"base", inbox.URL, inbox.URL + "/all/"},
		{"all index", inbox.URL + "/all/", inbox.URL + "/all/"},
		{"list", list, list + "/"},
		{"message URL", list + "/" + msgid + "/T/#u", list + "/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, base := testService(t, Config{AllowTrees: []string{tree}, Lore: c.lore})
			// Version 9 is refused only after the thread was fetched and
			// resolved: "version" (not "msgid") proves the fetch worked.
			for _, id := range []string{msgid, inbox.URL + "/all/" + msgid + "/", list + "/" + msgid + "/T/"} {
				req := SubmitRequest{MsgID: id, Pipeline: "ppc-preempt-dynamic", Tree: tree, Version: 9}
				code, e, raw := call(t, "POST", base+"/api/v1/evaluations", "", req)
				if code != 400 || e.Field != "version" {
					t.Errorf("submit %s: %d %s, want 400 on version (the thread fetched)", id, code, raw)
				}
			}
			other := SubmitRequest{MsgID: "http://127.0.0.2:9/all/" + msgid + "/", Pipeline: "ppc-preempt-dynamic", Tree: tree}
			if code, e, raw := call(t, "POST", base+"/api/v1/evaluations", "", other); code != 400 || !strings.Contains(e.Error, "not on this service's lore") {
				t.Errorf("a URL on another server: %d %s, want 400 not on this service's lore", code, raw)
			}
			e, _, err := s.Store().CreateOrResumeEvaluation("lore-"+c.name, store.EvaluationMeta{Pipeline: "ppc-preempt-dynamic", SeriesMsgID: msgid, SeriesTitle: "backport"})
			if err != nil {
				t.Fatal(err)
			}
			page := getPage(t, base+"/evaluations/"+strconv.FormatInt(e.ID, 10))
			if want := `href="` + c.link + msgid + `/"`; !strings.Contains(page, want) || strings.Contains(page, "/all/all/") {
				t.Errorf("evaluation page: want the link %s (and no /all/all/)", want)
			}
			// The link is one the server answers.
			resp, err := http.Get(c.link + msgid + "/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("GET %s%s/: %s", c.link, msgid, resp.Status)
			}
		})
	}
	_, err := New(context.Background(), Config{Lore: "mailto:linuxppc-dev@lists.ozlabs.org", Database: filepath.Join(t.TempDir(), "x.db"), Log: testWriter{t}})
	if fail.KindOf(err) != fail.KindInput || !strings.Contains(err.Error(), "--lore") {
		t.Errorf("serve --lore mailto: %v, want a bad-input error naming --lore", err)
	}
}
