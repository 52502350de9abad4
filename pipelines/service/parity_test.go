package service

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/patcheval/patcheval/internal/testinbox"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
	"github.com/patcheval/patcheval/series"
)

// TestSubmitDefaultAndTOML: the service takes the pipelines lore --pipeline
// takes: "default" (with arch), and a pipeline file's text when it has a
// token; each submission is the very evaluation (same key) lore makes
// from the same thread, tree and base.
func TestSubmitDefaultAndTOML(t *testing.T) {
	inbox := testinbox.Start(t, backport)
	root := t.TempDir()
	tree := gitRepo(t, filepath.Join(root, "allowed", "linux"))
	const tok = "0123456789abcdef-test-token"
	_, base := testService(t, Config{AllowTrees: []string{filepath.Join(root, "allowed")}, Lore: inbox.URL, Token: []byte(tok), Jobs: 1})
	_, open := testService(t, Config{AllowTrees: []string{filepath.Join(root, "allowed")}, Lore: inbox.URL})
	const msgid = "20261102093000.4121-0-tester@example.org"

	// What lore --pipeline builds from the same thread.
	data, err := os.ReadFile(backport)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := mbox.ParseBytes(data, "backport")
	if err != nil {
		t.Fatal(err)
	}
	thread := mbox.NewThread(msgs, "backport")
	se, err := series.Resolve(thread, series.Options{})
	if err != nil {
		t.Fatal(err)
	}
	loreKey := func(p *pipelines.Pipeline) string {
		t.Helper()
		st, err := store.Open(filepath.Join(t.TempDir(), "lore.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		o := runner.Options{Mbox: runner.ThreadMbox(thread), Version: se.Version, ThreadSource: thread.Source, AM: series.DefaultAMOptions(), Tree: tree, Base: "HEAD"}
		id, _, err := runner.Submit(context.Background(), runner.Env{Store: st}, p, o)
		if err != nil {
			t.Fatal(err)
		}
		e, err := st.Evaluation(id)
		if err != nil {
			t.Fatal(err)
		}
		return e.Key
	}
	serviceKey := func(req SubmitRequest) string {
		t.Helper()
		code, e, raw := call(t, "POST", base+"/api/v1/evaluations", tok, req)
		var resp SubmitResponse
		if err := json.Unmarshal(raw, &resp); (code != 201 && code != 200) || err != nil || resp.Evaluation == nil {
			t.Fatalf("submit %s: %d %+v %s", req.Pipeline, code, e, raw)
		}
		return resp.Evaluation.Key
	}

	def, err := pipelines.Default(se, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := serviceKey(SubmitRequest{MsgID: msgid, Pipeline: "default", Tree: tree, Base: "HEAD"}), loreKey(def); got != want {
		t.Errorf("submit --pipeline default: key %s, lore --pipeline default's %s", got, want)
	}
	defArm, err := pipelines.Default(se, []string{"arm64"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := serviceKey(SubmitRequest{MsgID: msgid, Pipeline: "default", Arch: "arm64", Tree: tree, Base: "HEAD"}), loreKey(defArm); got != want {
		t.Errorf("submit --pipeline default --arch arm64: key %s, lore's %s", got, want)
	}
	src, err := pipelines.BuiltinSource("ppc-preempt-dynamic")
	if err != nil {
		t.Fatal(err)
	}
	fileP, err := pipelines.Parse(src, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := serviceKey(SubmitRequest{MsgID: msgid, PipelineTOML: string(src), Tree: tree, Base: "HEAD"}), loreKey(fileP); got != want {
		t.Errorf("submit of a pipeline file: key %s, lore --pipeline FILE's %s", got, want)
	}

	for _, c := range []struct {
		name, url string
		req       SubmitRequest
		code      int
		field     string
	}{
		{"toml without a service token", open, SubmitRequest{MsgID: msgid, PipelineTOML: string(src), Tree: tree, Base: "HEAD"}, 403, "pipeline_toml"},
		{"bad toml", base, SubmitRequest{MsgID: msgid, PipelineTOML: "name = 3\n", Tree: tree, Base: "HEAD"}, 400, "pipeline_toml"},
		{"arch of another pipeline", base, SubmitRequest{MsgID: msgid, Pipeline: "selinux-tax", Arch: "arm64", Tree: tree}, 400, "arch"},
		{"unknown arch", base, SubmitRequest{MsgID: msgid, Pipeline: "default", Arch: "vax", Tree: tree}, 400, "arch"},
		{"default without a tree", base, SubmitRequest{MsgID: msgid, Pipeline: "default"}, 400, "tree"},
	} {
		code, e, raw := call(t, "POST", c.url+"/api/v1/evaluations", tok, c.req)
		if code != c.code || e.Field != c.field {
			t.Errorf("%s: %d %s, want %d naming %s", c.name, code, raw, c.code, c.field)
		}
	}
}
