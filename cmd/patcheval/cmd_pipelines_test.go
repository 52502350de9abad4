package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
)

// TestPipelinesListAndShow: `pipelines` names every shipped pipeline with
// its arches and one line, `pipelines show NAME` prints TOML that parses,
// default included.
func TestPipelinesListAndShow(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"pipelines"}); code != 0 {
		t.Fatalf("pipelines: exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"default", "per series", "ppc-preempt-dynamic", "ppc64le", "arm64-kill", "arm64", "selinux-tax", "bridge-loop", "rcu-sync-latency", "ppc-preempt-releases", "rcu-gp-qs"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("pipelines: no %q in\n%s", want, out.String())
		}
	}
	out.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"pipelines", "--json"}); code != 0 {
		t.Fatalf("pipelines --json: exit %d: %s", code, errb.String())
	}
	var infos []pipelineInfo
	if err := json.Unmarshal(out.Bytes(), &infos); err != nil || len(infos) < 6 {
		t.Fatalf("pipelines --json: %v, %d entries\n%s", err, len(infos), out.String())
	}
	for _, i := range infos {
		if i.Description == "" || len(i.Arches) == 0 || strings.Contains(i.Description, "\n") {
			t.Errorf("pipelines --json: %+v: want a one-line description and arches", i)
		}
	}
	for _, name := range []string{"ppc-preempt-dynamic", "default"} {
		out.Reset()
		if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"pipelines", "show", name, "--arch", "arm64"}); code != 0 {
			t.Fatalf("pipelines show %s: exit %d: %s", name, code, errb.String())
		}
		var v map[string]any
		if _, err := toml.Decode(out.String(), &v); err != nil || v["name"] != name {
			t.Errorf("pipelines show %s: not its TOML (%v, name %v)\n%s", name, err, v["name"], out.String())
		}
	}
	errb.Reset()
	if code := run(context.Background(), &Env{Stdout: &out, Stderr: &errb}, []string{"pipelines", "show", "nope"}); code != 2 || !strings.Contains(errb.String(), `"nope"`) {
		t.Errorf("pipelines show nope: exit %d, %q; want 2 naming it", code, errb.String())
	}
}
