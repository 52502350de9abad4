package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate/guest/userland"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
)

func init() {
	register(&command{
		name:    "userland",
		summary: "build (or find in the cache) the guest's stress-ng and perf from Debian's packages for an architecture",
		usage:   "patcheval userland [--arch ppc64le|arm64|x86_64|riscv64,...] [--tools stress-ng,perf] [--json]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			arches := fs.String("arch", "ppc64le,arm64,x86_64", "comma-separated guest `arches`")
			tools := fs.String("tools", "stress-ng,perf", "comma-separated `tools`")
			asJSON := fs.Bool("json", false, "print the archives as JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return fail.Inputf("userland takes no arguments (got %q)", strings.Join(args, " "))
				}
				var out []*userland.Userland
				for _, a := range strings.Split(*arches, ",") {
					u, err := userland.Build(ctx, strings.TrimSpace(a), strings.Split(*tools, ","), xdg.CacheDir(), env.Stderr)
					if err != nil {
						return err
					}
					out = append(out, u)
				}
				if *asJSON {
					enc := json.NewEncoder(env.Stdout)
					enc.SetIndent("", "  ")
					return enc.Encode(out)
				}
				for _, u := range out {
					var v []string
					for t, ver := range u.Versions {
						v = append(v, t+" "+ver)
					}
					sort.Strings(v)
					fmt.Fprintf(env.Stdout, "%s: %s: %d files, %d KiB (%s)%s\n", u.Arch, u.Archive, len(u.Files), u.Bytes>>10,
						strings.Join(v, ", "), map[bool]string{true: ", cached"}[u.Cached])
				}
				return nil
			}
		},
	})
}
