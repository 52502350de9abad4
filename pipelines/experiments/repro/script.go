package repro

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/runner"
	"github.com/patcheval/patcheval/series"
)

// reproScript is repro.sh: the same evaluation again with patcheval, in a
// fresh cache and state directory, then a reproducer of the rerun and a
// comparison of its samples with samples.csv.
func reproScript(in *runner.Stored, m Manifest, command string) (string, error) {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("#!/bin/sh")
	p("# Reruns patcheval evaluation %d (pipeline %s) from scratch: the same", m.EvaluationID, m.Pipeline)
	p("# pipeline, base commit and series, with a fresh cache (every kernel is")
	p("# built again) and state, then compares the new samples with samples.csv.")
	p("#")
	p("#   TREE=/path/to/linux.git ./repro.sh      (the tree must have commit %s)", short(m.BaseCommit))
	for _, n := range sortedTrees(m.Trees) {
		t := m.Trees[n]
		if t.Ref != "" {
			p("#   variant %s builds %s (%s): the tree must have it too", n, t.Ref, short(t.Onto))
		}
		if len(t.Reverted) > 0 {
			p("#   variant %s reverts %d change(s) on it; patcheval makes the same revert commits again (trees.txt)", n, len(t.Reverted))
		}
	}
	p("#")
	p("# PATCHEVAL names the patcheval binary, WORK the work directory")
	p("# (default ./rerun), PATCHEVAL_CACHE_DIR a cache to reuse instead of a fresh one.")
	p("set -eu")
	p(`here=$(cd "$(dirname "$0")" && pwd)`)
	p("PATCHEVAL=${PATCHEVAL:-%s}", shellQuote(command))
	p("TREE=${TREE:-%s}", shellQuote(in.Options.Tree))
	p(`work=${WORK:-$here/rerun}`)
	p(`export PATCHEVAL_CACHE_DIR="${PATCHEVAL_CACHE_DIR:-$work/cache}"`)
	p(`export PATCHEVAL_STATE_DIR="$work/state" PATCHEVAL_CONFIG_DIR="$work/config"`)
	p(`mkdir -p "$work"`)
	args, why := loreArgs(in)
	if why != "" {
		p("echo %s >&2", shellQuote("repro.sh: "+why))
		p("exit 2")
		return b.String(), nil
	}
	p(`"$PATCHEVAL" lore %s`, args)
	p(`rm -rf "$work/repro"`)
	p(`"$PATCHEVAL" repro --db "$work/state/patcheval.db" 1 "$work/repro"`)
	tol := "1"
	if !in.Pipeline.Deterministic {
		p("# Not deterministic (no QEMU -icount): the rerun's values differ by noise;")
		p("# the comparison below uses a 10%% tolerance and is a sanity check only.")
		tol = "10"
	}
	p(`"$PATCHEVAL" repro --compare --tolerance %s "$here/samples.csv" "$work/repro/samples.csv"`, tol)
	return b.String(), nil
}

// loreArgs are `patcheval lore`'s arguments that evaluate the series again
// as stored, or why there are none.
func loreArgs(in *runner.Stored) (string, string) {
	o := in.Options
	if in.Series == nil || len(o.Mbox) == 0 {
		return "", fmt.Sprintf("evaluation %d has no series (pipeline %s evaluates the tree as it is); rerun it with the command that made it (watch or bisect)", in.ID, in.Pipeline.Name)
	}
	first := in.Series.First()
	if first == nil || first.NoMessageID {
		return "", "the series' first message has no Message-ID to pick it by"
	}
	var a []string
	a = append(a, "-m", `"$here/series.mbox"`)
	if in.Series.Version > 0 {
		a = append(a, "-v", strconv.Itoa(in.Series.Version))
	}
	if o.AnySender {
		a = append(a, "--any-sender")
	}
	if o.AM.LinkMask != series.DefaultLinkMask {
		a = append(a, "--link-mask", shellQuote(o.AM.LinkMask))
	}
	switch {
	case in.PipelineSource != "":
		a = append(a, "--pipeline", `"$here/pipeline.toml"`)
	case in.Pipeline.Name == pipelines.DefaultName:
		a = append(a, "--pipeline", pipelines.DefaultName, "--arch", strings.Join(in.Pipeline.Arches, ","))
	case builtin(in.Pipeline.Name):
		a = append(a, "--pipeline", in.Pipeline.Name)
	default:
		return "", fmt.Sprintf("pipeline %s was made in code (no TOML source); pipeline.json is what ran", in.Pipeline.Name)
	}
	a = append(a, "--tree", `"$TREE"`, "--base", in.BaseHash)
	if o.Fuzz > 0 {
		a = append(a, "--fuzz", strconv.Itoa(o.Fuzz))
	}
	if o.ThreeWay {
		a = append(a, "--3way")
	}
	if o.Cover {
		a = append(a, "--cover")
	}
	if o.RevertIfMerged {
		a = append(a, "--revert-if-merged")
	}
	if o.Boots > 0 {
		a = append(a, "--boots", strconv.Itoa(o.Boots))
	}
	a = append(a, "--out", `"$work/out"`, "--from", shellQuote("patcheval repro <repro@example.org>"), shellQuote(first.MessageID))
	return strings.Join(a, " "), ""
}

func short(h string) string {
	if len(h) > 12 {
		return h[:12]
	}
	return h
}

func readme(m Manifest) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	p("Reproducer of patcheval evaluation %d (pipeline %s, %s)", m.EvaluationID, m.Pipeline, m.Status)
	p("")
	if m.Series != nil {
		p("Series: %s (v%d), %d message(s): message-ids.txt, series.mbox", m.Series.Title, m.Series.Version, len(m.Series.MessageIDs))
	}
	p("Base:   %s (%s) in %s: base.txt", m.BaseCommit, m.Base, m.Tree)
	p("")
	p("  repro.sh         reruns everything from scratch with patcheval and compares the samples")
	if len(m.Trees) > 0 {
		p("  trees.txt        the variants' own trees: the ref each builds, the changes it reverts")
	}
	p("  pipeline.toml    the pipeline file as run (when it came from one); pipeline.json the model")
	p("  kernels/         each kernel's final .config and build metadata (make command, toolchain)")
	p("  toolchains.txt   compiler and tool versions per kernel, guest userland packages")
	p("  qemu.txt         the QEMU command line of every boot")
	p("  guest.txt        kernel release, guest agent version and perf events per boot")
	p("  samples.csv      every raw sample (%d)", m.Samples)
	p("  manifest.json    all of the above, structured")
	if len(m.Missing) > 0 {
		p("")
		p("Missing:")
		for _, s := range m.Missing {
			p("  %s", s)
		}
	}
	return b.String()
}

func sortedTrees(t map[string]runner.VariantTree) []string {
	var out []string
	for n := range t {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
