package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/bots/follow"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/service"
	"github.com/patcheval/patcheval/pipelines/store"
)

// refusingService is the follow.Service of a test that must not submit.
type refusingService struct{}

func (refusingService) Submit(context.Context, *pipelines.Pipeline, runner.Options) (int64, bool, error) {
	panic("nothing is submitted while building the follower")
}
func (refusingService) Cancel(context.Context, int64) error { return nil }

var _ follow.Service = refusingService{}

// TestServeFollowerFromConfig: serve follows exactly the [[list]] tables
// of config.toml; none is no follower loop, and a list naming a pipeline
// that does not exist is bad input naming the file and the pipeline,
// before serve listens.
func TestServeFollowerFromConfig(t *testing.T) {
	dir := t.TempDir()
	st, err := store.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	config := filepath.Join(dir, "config.toml")
	o := serveOptions{Listen: "127.0.0.1:8080", Log: io.Discard}
	loops := func(cfg service.Config) []string {
		var out []string
		for _, l := range cfg.Loops {
			out = append(out, l.Name)
		}
		return out
	}

	var cfg service.Config
	if f, err := setupBots(&cfg, o, config); err != nil || f != nil || len(cfg.Loops) != 0 || cfg.Notify != nil {
		t.Fatalf("no config file: bind %v, %v, loops %v; want nothing and no error", f != nil, err, loops(cfg))
	}
	os.WriteFile(config, []byte("[[watch]]\nremote = \"file:///x\"\n"), 0o644)
	if f, err := setupBots(&cfg, o, config); err != nil || f != nil || len(cfg.Loops) != 0 {
		t.Fatalf("config without [[list]]: bind %v, %v, loops %v; want nothing and no error", f != nil, err, loops(cfg))
	}

	os.WriteFile(config, []byte(`
[[list]]
url = "http://127.0.0.1:1/linuxppc-dev/"
paths = ["arch/powerpc/**"]
pipeline = "ppc-preempt-dynamic"
tree = "/srv/linux.git"
`), 0o644)
	f, err := setupBots(&cfg, o, config)
	if err != nil || f == nil {
		t.Fatalf("bind %v, %v", f != nil, err)
	}
	if got := loops(cfg); strings.Join(got, " ") != "follow" || cfg.Notify != nil || cfg.Posts != nil {
		t.Fatalf("a list without reporters: loops %v, notify %v; want the follow loop only", got, cfg.Notify != nil)
	}
	lists, err := loadLists(config)
	if err != nil {
		t.Fatal(err)
	}
	fl := newFollower(io.Discard, lists, st, refusingService{})
	if len(fl.Lists) != 1 || fl.Lists[0].Name != "linuxppc-dev" || fl.Lists[0].Pipeline != "ppc-preempt-dynamic" ||
		fl.Store != st || fl.Dir == "" {
		t.Fatalf("follower %+v: want the one list, the service's store and a mirror directory", fl)
	}

	os.WriteFile(config, []byte(`
[[list]]
url = "http://127.0.0.1:1/netdev/"
pipeline = "no-such-pipeline"
`), 0o644)
	_, err = setupBots(&service.Config{}, o, config)
	if err == nil || !strings.Contains(err.Error(), config) || !strings.Contains(err.Error(), "no-such-pipeline") {
		t.Fatalf("unknown pipeline: error %v, want one naming %s and the pipeline", err, config)
	}

	// per_patch needs a pipeline comparing a kernel without the series
	// with the same kernel with it: refused before serve listens.
	os.WriteFile(config, []byte(`
[[list]]
url = "http://127.0.0.1:1/linuxppc-dev/"
pipeline = "ppc-preempt-dynamic"
per_patch = true
`), 0o644)
	_, err = setupBots(&service.Config{}, o, config)
	if err == nil || !strings.Contains(err.Error(), config) || !strings.Contains(err.Error(), "per_patch") || fail.KindOf(err) != fail.KindInput {
		t.Fatalf("per_patch with ppc-preempt-dynamic: error %v, want bad input naming %s and per_patch", err, config)
	}
}
