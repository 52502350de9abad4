package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
)

func init() {
	register(&command{
		name:    "checkout",
		summary: "materialise a commit's tree into a directory (incremental: only changed files are rewritten)",
		usage:   "patcheval checkout [--tree PATH] [--json] <commit> DIR",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			tree := fs.String("tree", ".", "kernel git tree (normal or bare clone)")
			asJSON := fs.Bool("json", false, "print the result as JSON")
			verbose := fs.Bool("verbose", false, "list the paths written/removed by an incremental checkout")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) != 2 {
					return fail.Inputf("want <commit> DIR, got %d arguments", len(args))
				}
				st, err := gittree.Checkout(ctx, *tree, args[0], args[1])
				if err != nil {
					return err
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(st)
				}
				fmt.Fprintln(env.Stdout, st)
				if *verbose {
					for _, p := range st.Paths {
						fmt.Fprintln(env.Stdout, "  "+p)
					}
				}
				return nil
			}
		},
	})
}
