package main

import (
	"context"
	"encoding/json"
	"flag"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/fail"
)

func init() {
	register(&command{
		name:    "config-diff",
		summary: "explain how two final kernel configs differ: requested vs derived symbols, with the Kconfig rule behind each",
		usage:   "patcheval config-diff A B [--requested SYM=v,...] [--tree SRC|REPO [--commit REF]] [--arch A] [--json]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			requested := fs.String("requested", "", "the variants' own symbols, SYM=v,... (default: from the artifacts' metadata)")
			tree := fs.String("tree", "", "kernel source directory or git repository whose Kconfig explains the changes (default: from B's metadata)")
			commit := fs.String("commit", "", "revision in --tree when it is a git repository (default: B's commit, else HEAD)")
			arch := fs.String("arch", "", "architecture (default: from the metadata)")
			asJSON := fs.Bool("json", false, "print the changes as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) != 2 {
					return fail.Inputf("want two configs: A and B (.config files or build artifact directories)")
				}
				in := build.DiffInput{A: args[0], B: args[1], Tree: *tree, Commit: *commit, Arch: *arch}
				if *requested != "" {
					m, err := build.ParseSymbols(*requested)
					if err != nil {
						return err
					}
					in.Requested = m
				}
				rep, err := build.ConfigDiff(in)
				if err != nil {
					return err
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(rep)
				}
				return rep.Format(env.Stdout)
			}
		},
	})
}
