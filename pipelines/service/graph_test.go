package service

import (
	"context"
	"fmt"
	"testing"

	"github.com/riverqueue/river"

	"github.com/patcheval/patcheval/evaluate"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/pipelines/store"
)

// The jobs that follow a step are runner.Next's steps: after an apply,
// one configure per kernel in its arch's build queue (configuring needs
// the arch's toolchain); after a configure that is not the last,
// nothing; after the last, one build per kernel in the same queues;
// after a build that is not the last, nothing; after the last boot of a round, the next adaptive
// round while the graph allows one and then the report (the rounds are
// bounded by runner.MaxRound, as in a local run).
func TestJobsFollowTheGraph(t *testing.T) {
	s, _ := testService(t, Config{})
	ctx := context.Background()
	g := runner.Graph{MaxRound: runner.MaxRound(2)}
	at := after{id: 7, gen: 1, graph: g, specs: map[string]pipelines.BuildSpec{
		"a": {Key: "a", Arch: "ppc64le"}, "b": {Key: "b", Arch: "arm64"}}}
	cases := []struct {
		done runner.Step
		f    runner.Found
		want string
	}{
		{runner.Step{Stage: runner.StageApply}, runner.Found{Kernels: []string{"a", "b"}}, "configure a build-ppc64le; configure b build-arm64"},
		{runner.Step{Stage: runner.StageConfigure, Key: "a"}, runner.Found{Configuring: 1, Kernels: []string{"a", "b"}}, ""},
		{runner.Step{Stage: runner.StageConfigure, Key: "b"}, runner.Found{Kernels: []string{"a", "b"}}, "build a build-ppc64le; build b build-arm64"},
		{runner.Step{Stage: runner.StageBuild, Key: "a"}, runner.Found{Building: 1}, ""},
		{runner.Step{Stage: runner.StageBuild, Key: "b"}, runner.Found{}, "more 0 initial more"},
		{runner.Step{Stage: runner.StagePlan}, runner.Found{}, "report report"},
		{runner.Step{Stage: runner.StageBoot, Round: 1, Boot: evaluate.BootKey{Variant: "x"}}, runner.Found{}, "more 2 more"},
		// Round 2 is the last: no third adaptive round (a queue used to
		// go on to round 256).
		{runner.Step{Stage: runner.StageBoot, Round: 2, Boot: evaluate.BootKey{Variant: "x"}}, runner.Found{}, "report report"},
		{runner.Step{Stage: runner.StageMore, Round: 2}, runner.Found{}, "report report"},
	}
	for _, c := range cases {
		err := s.db.Store.Tx(ctx, func(tx *store.Tx) error {
			next, err := s.follow(ctx, tx, at, c.done, c.f)
			if err != nil {
				return err
			}
			if got := describeJobs(next); got != c.want {
				t.Errorf("after %s: jobs %q, want %q", c.done, got, c.want)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("after %s: %v", c.done, err)
		}
	}
}

func describeJobs(jobs []river.InsertManyParams) string {
	out := ""
	for i, j := range jobs {
		if i > 0 {
			out += "; "
		}
		switch a := j.Args.(type) {
		case ConfigureArgs:
			out += fmt.Sprintf("configure %s %s", a.Key, j.InsertOpts.Queue)
		case BuildArgs:
			out += fmt.Sprintf("build %s %s", a.Key, j.InsertOpts.Queue)
		case MoreArgs:
			out += fmt.Sprintf("more %d", a.Round)
			if a.Initial {
				out += " initial"
			}
			out += " " + j.InsertOpts.Queue
		default:
			out += j.Args.Kind() + " " + j.InsertOpts.Queue
		}
	}
	return out
}
