package runner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/patcheval/patcheval/evaluate"
)

// walk takes the graph from apply to done, answering each step with
// found(step), and returns the steps taken in order (one per line).
func walk(t *testing.T, g Graph, found func(Step) Found) []string {
	t.Helper()
	var taken []string
	queue := []Step{{Stage: StageApply}}
	for len(queue) > 0 {
		if len(taken) > 100 {
			t.Fatalf("the graph does not end: %s", strings.Join(taken, ", "))
		}
		step := queue[0]
		queue = queue[1:]
		taken = append(taken, step.String())
		queue = append(queue, Next(g, step, found(step))...)
	}
	return taken
}

func TestNextWalksTheStages(t *testing.T) {
	a0 := evaluate.BootKey{Variant: "base", Boot: 0}
	b0 := evaluate.BootKey{Variant: "patched", Boot: 0}
	a1 := evaluate.BootKey{Variant: "base", Boot: 1}
	b1 := evaluate.BootKey{Variant: "patched", Boot: 1}
	configures, builds := 0, 0
	found := func(s Step) Found {
		switch s.Stage {
		case StageApply:
			return Found{Kernels: []string{"k1", "k2"}}
		case StageConfigure:
			configures++
			return Found{Configuring: 2 - configures, Kernels: []string{"k1", "k2"}}
		case StageBuild:
			builds++
			return Found{Building: 2 - builds}
		case StagePlan:
			return Found{Boots: []evaluate.BootKey{a0, b0}}
		case StageMore:
			if s.Round == 1 {
				return Found{Boots: []evaluate.BootKey{a1, b1}}
			}
		case StageReport:
			return Found{Bisect: true}
		}
		return Found{}
	}
	got := walk(t, Graph{MaxRound: 4, PerPatch: true, SeriesBisect: true}, found)
	want := []string{"apply", "configure k1", "configure k2", "build k1", "build k2", "plan", "boot base#0 (round 0)", "boot patched#0 (round 0)",
		"more (round 1)", "boot base#1 (round 1)", "boot patched#1 (round 1)", "more (round 2)",
		"report", "per_patch", "done"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("steps:\n got %s\nwant %s", strings.Join(got, ", "), strings.Join(want, ", "))
	}
}

// Every kernel is configured before any compiles: the builds follow the
// last configure only, and they are the kernels it says are left (a
// local run with Options.KeepGoing drops the variants that cannot be
// configured).
func TestNextConfiguresBeforeBuilding(t *testing.T) {
	for _, c := range []struct {
		name string
		left []string
		want string
	}{
		{"all", []string{"a", "b", "c"}, "apply, configure a, configure b, configure c, build a, build b, build c, plan, report, done"},
		{"one dropped", []string{"a", "c"}, "apply, configure a, configure b, configure c, build a, build c, plan, report, done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			configuring, building := 3, len(c.left)
			got := walk(t, Graph{MaxRound: 1}, func(s Step) Found {
				switch s.Stage {
				case StageApply:
					return Found{Kernels: []string{"a", "b", "c"}}
				case StageConfigure:
					configuring--
					return Found{Configuring: configuring, Kernels: c.left}
				case StageBuild:
					building--
					return Found{Building: building}
				}
				return Found{}
			})
			if g := strings.Join(got, ", "); g != c.want {
				t.Errorf("steps %s\nwant %s", g, c.want)
			}
		})
	}
	// A configure that is not the last is followed by nothing.
	if got := Next(Graph{}, Step{Stage: StageConfigure, Key: "a"}, Found{Configuring: 1, Kernels: []string{"a", "b"}}); len(got) != 0 {
		t.Errorf("after a configure with another still configuring: %v, want nothing", got)
	}
}

func TestNextFollowUps(t *testing.T) {
	for _, c := range []struct {
		name   string
		g      Graph
		bisect bool
		want   string
	}{
		{"none", Graph{MaxRound: 1}, true, "report, done"},
		{"bisect, no regression", Graph{MaxRound: 1, SeriesBisect: true}, false, "report, done"},
		{"bisect", Graph{MaxRound: 1, SeriesBisect: true}, true, "report, series_bisect, done"},
		{"per patch then bisect", Graph{MaxRound: 1, PerPatch: true, SeriesBisect: true}, true, "report, per_patch, series_bisect, done"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := walk(t, c.g, func(s Step) Found {
				if s.Stage == StageReport || s.Stage == StagePerPatch {
					return Found{Bisect: c.bisect}
				}
				return Found{}
			})
			// No kernels, no boots: apply, plan, then the report.
			if g := strings.Join(got[2:], ", "); g != c.want || got[0] != "apply" || got[1] != "plan" {
				t.Errorf("steps %s, want apply, plan, %s", strings.Join(got, ", "), c.want)
			}
		})
	}
}

// A round whose boots all failed for infrastructure reasons is offered
// again by More: the rounds stop at MaxRound.
func TestNextBoundsTheRounds(t *testing.T) {
	k := evaluate.BootKey{Variant: "base"}
	got := walk(t, Graph{MaxRound: MaxRound(2)}, func(s Step) Found {
		if s.Stage == StagePlan || s.Stage == StageMore {
			return Found{Boots: []evaluate.BootKey{k}}
		}
		return Found{}
	})
	want := "apply, plan, boot base#0 (round 0), more (round 1), boot base#0 (round 1), more (round 2), boot base#0 (round 2), report, done"
	if g := strings.Join(got, ", "); g != want {
		t.Errorf("steps %s\nwant %s", g, want)
	}
	if MaxRound(0) != 1 {
		t.Errorf("MaxRound(0) = %d, want 1 (one adaptive round at most)", MaxRound(0))
	}
}
