package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/series"
)

// pipelineInfo is one line of `patcheval pipelines`.
type pipelineInfo struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Arches      []string `json:"arches"`
	// PerSeries is true for default: its arches and base come from the
	// series it evaluates.
	PerSeries bool `json:"per_series,omitempty"`
}

func init() {
	register(&command{
		name:    "pipelines",
		summary: "list the shipped pipelines (name, what they measure, arches); 'pipelines show NAME' prints one's TOML",
		usage:   "patcheval pipelines [--json] | pipelines show NAME [--arch A,B] [--json]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			asJSON := fs.Bool("json", false, "print JSON")
			archFlag := fs.String("arch", "", "with 'show default': the `arches` to generate it for (default: x86_64, as for a series touching no arch/)")
			return func(ctx context.Context, env *Env, args []string) error {
				switch {
				case len(args) == 0:
					return listPipelines(env, *asJSON)
				case args[0] == "show" && len(args) == 2:
					return showPipeline(env, args[1], *archFlag, *asJSON)
				default:
					return fail.Inputf("usage: %s", "patcheval pipelines [--json] | pipelines show NAME")
				}
			}
		},
	})
}

func listPipelines(env *Env, asJSON bool) error {
	infos := []pipelineInfo{{
		Name:        pipelines.DefaultName,
		Description: "base vs patched on the series' base, syscall benchmarks, deterministic QEMU; fits any series",
		Arches:      []string{"those the series touches (ppc64le, arm64, x86_64, riscv64; else x86_64)"},
		PerSeries:   true,
	}}
	for _, n := range pipelines.List() {
		p, err := pipelines.Builtin(n)
		if err != nil {
			return fail.Infraf("shipped pipeline %s: %w", n, err)
		}
		infos = append(infos, pipelineInfo{Name: n, Description: oneLine(p.Description), Arches: p.Arches})
	}
	if asJSON {
		return writeJSON(env.Stdout, infos)
	}
	tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tARCHES\tWHAT")
	for _, i := range infos {
		arches := strings.Join(i.Arches, ",")
		if i.PerSeries {
			arches = "per series"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", i.Name, arches, i.Description)
	}
	if err := tw.Flush(); err != nil {
		return fail.Infraf("writing the list: %w", err)
	}
	fmt.Fprintln(env.Stdout, "\n'patcheval pipelines show NAME' prints one; --pipeline takes a name or a file")
	return nil
}

func showPipeline(env *Env, name, archFlag string, asJSON bool) error {
	var src []byte
	if name == pipelines.DefaultName {
		var arches []string
		if archFlag != "" {
			arches = strings.Split(archFlag, ",")
		}
		// default is generated per series; a series of one empty patch
		// touches no arch/ (x86_64) and has no base-commit.
		p, err := pipelines.Default(&series.Series{Patches: []*series.Patch{{}}}, arches)
		if err != nil {
			return err
		}
		src = append([]byte("# default is generated for each series: its arches are those the series\n"+
			"# touches (--arch overrides) and its base is the series' base-commit when\n# the tree has it.\n"), p.Source...)
	} else {
		var err error
		if src, err = pipelines.BuiltinSource(name); err != nil {
			return err
		}
	}
	if asJSON {
		return writeJSON(env.Stdout, map[string]string{"name": strings.TrimSuffix(name, ".toml"), "toml": string(src)})
	}
	_, err := env.Stdout.Write(src)
	return err
}

// oneLine is the first sentence-ish of a description on one line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 110 {
		cut := strings.LastIndex(s[:110], " ")
		if cut < 60 {
			cut = 110
		}
		s = s[:cut] + " ..."
	}
	return s
}

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fail.Infraf("writing JSON: %w", err)
	}
	return nil
}
