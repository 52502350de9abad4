package build

import (
	"bytes"
	"strings"

	"github.com/patcheval/patcheval/build/kconfig"
)

// explainProblems fills in Why (and Kind "missing" for symbols the tree
// does not declare) for requested symbols that did not hold, from the
// tree's own Kconfig files.
func explainProblems(src, srcArch string, final []byte, requested map[string]string, probs []ConfigProblem) {
	kc, err := kconfig.Parse(src, srcArch)
	if err != nil || kc == nil {
		for i := range probs {
			if probs[i].Why == "" && err != nil {
				probs[i].Why = "(Kconfig sources could not be read: " + err.Error() + ")"
			}
		}
		return
	}
	cfg, err := kconfig.ParseConfig(bytes.NewReader(final))
	if err != nil {
		return
	}
	why := map[string]kconfig.Problem{}
	for _, p := range kconfig.Verify(kc, cfg, requested) {
		why[p.Symbol] = p
	}
	for i := range probs {
		s := kc.Symbol(probs[i].Symbol)
		if !s.Defined() {
			probs[i].Kind = "missing"
		}
		p, ok := why[probs[i].Symbol]
		if !ok {
			continue
		}
		lines := []string{p.Reason}
		for _, r := range p.Rules {
			lines = append(lines, r.String())
		}
		if hint := toolHint(p.Reason, cfg); hint != "" {
			lines = append(lines, hint)
		}
		probs[i].Why = strings.Join(lines, "\n")
	}
}

// toolHint says which host tool is missing when a refusal hangs on a
// version symbol that Kconfig reads from the build machine and found 0:
// DEBUG_INFO_BTF needs pahole (`depends on PAHOLE_VERSION >= 116` on 6.1,
// `>= 122` on 7.x), which is not part of a compiler toolchain.
func toolHint(reason string, cfg kconfig.Config) string {
	if strings.Contains(reason, "PAHOLE_VERSION") && cfg.Value("PAHOLE_VERSION") == "0" {
		return "PAHOLE_VERSION is 0: pahole is not installed on this machine (Debian's dwarves package; bookworm's is 1.24)"
	}
	return ""
}
