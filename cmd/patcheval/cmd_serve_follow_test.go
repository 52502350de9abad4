package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate/store"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/follow"
	"github.com/patcheval/patcheval/pipelines/runner"
)

// refusingService is the follow.Service of a test that must not submit.
type refusingService struct{}

func (refusingService) Submit(context.Context, *pipelines.Pipeline, runner.Options) (int64, bool, error) {
	panic("nothing is submitted while building the follower")
}
func (refusingService) Cancel(context.Context, int64) error { return nil }

var _ follow.Service = refusingService{}

// TestServeFollowerFromConfig: serve's "follow" loop follows exactly the
// [[list]] tables of config.toml; none is no follower (the loop ends
// quietly), and a list naming a pipeline that does not exist stops the
// loop with an error naming the file and the pipeline.
func TestServeFollowerFromConfig(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	config := filepath.Join(dir, "config.toml")

	if f, err := newFollower(io.Discard, config, st, refusingService{}); err != nil || f != nil {
		t.Fatalf("no config file: follower %v, error %v; want none and no error", f, err)
	}
	os.WriteFile(config, []byte("[[watch]]\nremote = \"file:///x\"\n"), 0o644)
	if f, err := newFollower(io.Discard, config, st, refusingService{}); err != nil || f != nil {
		t.Fatalf("config without [[list]]: follower %v, error %v; want none and no error", f, err)
	}

	os.WriteFile(config, []byte(`
[[list]]
url = "http://127.0.0.1:1/linuxppc-dev/"
paths = ["arch/powerpc/**"]
pipeline = "ppc-preempt-dynamic"
tree = "/srv/linux.git"
`), 0o644)
	f, err := newFollower(io.Discard, config, st, refusingService{})
	if err != nil {
		t.Fatal(err)
	}
	if f == nil || len(f.Lists) != 1 || f.Lists[0].Name != "linuxppc-dev" || f.Lists[0].Pipeline != "ppc-preempt-dynamic" ||
		f.Store != st || f.Dir == "" {
		t.Fatalf("follower %+v: want the one list, the service's store and a mirror directory", f)
	}

	os.WriteFile(config, []byte(`
[[list]]
url = "http://127.0.0.1:1/netdev/"
pipeline = "no-such-pipeline"
`), 0o644)
	_, err = newFollower(io.Discard, config, st, refusingService{})
	if err == nil || !strings.Contains(err.Error(), config) || !strings.Contains(err.Error(), "no-such-pipeline") {
		t.Fatalf("unknown pipeline: error %v, want one naming %s and the pipeline", err, config)
	}
}
