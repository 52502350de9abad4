package pipelines

import (
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/series"
)

// DefaultSpec is how a stored name (a watch's pipeline) spells the
// default pipeline on given arches: "default", or "default:arm64,x86_64".
func DefaultSpec(arches []string) string {
	if len(arches) == 0 {
		return DefaultName
	}
	return DefaultName + ":" + strings.Join(arches, ",")
}

// SplitDefault says whether spec names the default pipeline and with
// which arches (none: those the series touches).
func SplitDefault(spec string) (arches []string, ok bool) {
	if spec == DefaultName {
		return nil, true
	}
	rest, ok := strings.CutPrefix(spec, DefaultName+":")
	if !ok || rest == "" {
		return nil, false
	}
	return strings.Split(rest, ","), true
}

// Named resolves what --pipeline takes in every command and in the
// service: the default pipeline ("default" or DefaultSpec's
// "default:ARCHES"), generated for the series s, else a
// shipped name or a file (Find). arches, when given, overrides the
// default's; another pipeline names its own and refuses them.
//
// Without a series (a bisection or a watch of the tree as tagged),
// default is generated for an empty one: the base variant measures the
// tree as it is; its patched variant needs a series, as NeedsSeries says.
func Named(spec string, s *series.Series, arches []string) (*Pipeline, error) {
	specArches, isDefault := SplitDefault(spec)
	if !isDefault {
		if len(arches) > 0 {
			return nil, fail.Inputf("--arch goes with --pipeline %s; pipeline %s names its own arches", DefaultName, spec)
		}
		return Find(spec)
	}
	if len(arches) == 0 {
		arches = specArches
	}
	if s == nil {
		s = &series.Series{Patches: []*series.Patch{{}}}
		if len(arches) == 0 {
			arches = []string{"x86_64"}
		}
	}
	return Default(s, arches)
}
