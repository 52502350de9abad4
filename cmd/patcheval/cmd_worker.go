package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/build"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
	"github.com/patcheval/patcheval/pipelines/service"
)

func init() {
	register(&command{
		name:    "worker",
		summary: "work build and boot jobs of a patcheval serve's Postgres database on this machine (a farm)",
		usage:   "patcheval worker --db postgres://USER@HOST/DB [--server URL --token-file F] [--name N] [--ssh-target ssh://user@host]... [--build ARCHES] [--boot ARCHES] [--compiler-cache kcc|ccache|none] [--capabilities [--json]]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			database := new(string)
			dbFlag(fs, database, "the coordinator's `postgres://USER@HOST/DB` or libpq \"host=H dbname=D\" (password from ~/.pgpass or $PGPASSFILE)")
			server := fs.String("server", "", "the coordinator's `URL`: kernels built here go to its artifact store and kernels built elsewhere come from it (without it, builds and boots must share a filesystem)")
			tokenFile := fs.String("token-file", "", "`file` holding the coordinator's token (artifact uploads need it)")
			name := fs.String("name", "", "this worker's name on the workers page (default worker@<host>-<pid>)")
			workers, buildWorkers, checkAtOnce := atOnceFlags(fs)
			jobs := fs.Int("j", 0, "make -j budget shared by this machine's builds (default: number of CPUs)")
			grace := fs.Duration("grace", 30*time.Second, "on SIGTERM, how long running jobs may finish before they are cancelled (and retried, here or elsewhere)")
			ccache := fs.String("compiler-cache", "kcc", "this machine's builds' compiler cache: kcc (patcheval's, keyed by preprocessed tokens), ccache or none")
			cacheDir := fs.String("cache-dir", "", "this machine's cache directory (default $PATCHEVAL_CACHE_DIR or ~/.cache/patcheval)")
			var ssh stringList
			fs.Var(&ssh, "ssh-target", "`ssh://user@host[:port]` target this worker owns and boots (repeatable; also [worker] ssh_targets in config.toml)")
			buildArches := fs.String("build", "", "arches to build, comma-separated, instead of those with a toolchain (\"none\": no builds)")
			bootArches := fs.String("boot", "", "arches to boot under QEMU, comma-separated, instead of those with a QEMU (\"none\": no QEMU boots)")
			capsOnly := fs.Bool("capabilities", false, "print what this machine can run and its queues, and exit")
			asJSON := fs.Bool("json", false, "with --capabilities: JSON")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return fail.Inputf("worker: unexpected arguments %q", args)
				}
				if err := checkAtOnce(env, "worker"); err != nil {
					return err
				}
				if err := compilerCacheFlag(*ccache); err != nil {
					return err
				}
				conf, err := workerConfig(filepath.Join(xdg.ConfigDir(), "config.toml"))
				if err != nil {
					return err
				}
				caps, err := service.DetectCapabilities(ctx, append(conf.SSHTargets, ssh...))
				if err != nil {
					return err
				}
				if caps.Build, err = archList("--build", *buildArches, caps.Build); err != nil {
					return err
				}
				if caps.QEMU, err = archList("--boot", *bootArches, caps.QEMU); err != nil {
					return err
				}
				if *capsOnly {
					out := struct {
						service.Capabilities
						Queues []string `json:"queues"`
					}{caps, caps.Queues()}
					if *asJSON {
						e := json.NewEncoder(env.Stdout)
						e.SetIndent("", "  ")
						return e.Encode(out)
					}
					fmt.Fprintf(env.Stdout, "builds: %s\nQEMU:   %s (KVM: %v)\nSSH:    %s\ncores:  %d\nqueues: %s\n",
						orNone(caps.Build), orNone(caps.QEMU), caps.KVM, orNone(caps.SSH), caps.Cores, orNone(out.Queues))
					return nil
				}
				if *database == "" {
					return fail.Inputf("worker: --db postgres://... is required (the coordinator's database)")
				}
				var tok []byte
				if *tokenFile != "" {
					if tok, err = service.ReadToken(*tokenFile); err != nil {
						return err
					}
				} else if *server != "" {
					return fail.Inputf("--server needs --token-file (the coordinator takes artifact uploads only with its token)")
				}
				w, err := service.NewWorker(ctx, service.WorkerConfig{Database: *database, Server: *server, Token: tok, Name: *name, CacheDir: *cacheDir,
					Jobs: *jobs, CompilerCache: *ccache, BootWorkers: *workers, BuildWorkers: *buildWorkers, Grace: *grace, Capabilities: caps, Log: env.Stderr})
				if err != nil {
					return err
				}
				defer w.Close()
				fmt.Fprintf(env.Stdout, "patcheval worker %s: queues %s\n", w.Name(), strings.Join(w.Queues(), " "))
				return w.Run(ctx)
			}
		},
	})
}

// compilerCacheFlag checks serve's and worker's --compiler-cache: kcc,
// ccache or none, and ccache only where it is installed (found as the
// builds find it): its builds would each fail on it.
func compilerCacheFlag(v string) error {
	switch v {
	case "kcc", "none":
	case "ccache":
		if build.LookCCache() == "" {
			return fail.Inputf("--compiler-cache ccache: ccache is not installed here (not in PATH; apt-get install ccache)")
		}
	default:
		return fail.Inputf("--compiler-cache %q: want kcc, ccache or none", v)
	}
	return nil
}

// archList is the --build/--boot value as arch names: "" keeps detected,
// "none" is none, else each must be a known arch.
func archList(flagName, v string, detected []string) ([]string, error) {
	switch v {
	case "":
		return detected, nil
	case "none":
		return nil, nil
	}
	var out []string
	for _, a := range strings.Split(v, ",") {
		n, err := arch.Normalize(strings.TrimSpace(a))
		if err != nil {
			return nil, fail.Inputf("%s %s: %v", flagName, v, err)
		}
		out = append(out, n)
	}
	return out, nil
}

// workerFile is config.toml's [worker] table.
type workerFile struct {
	// SSHTargets are the ssh:// targets this machine owns.
	SSHTargets []string `toml:"ssh_targets"`
}

// workerConfig reads the [worker] table of config.toml at path (none when
// the file does not exist).
func workerConfig(path string) (workerFile, error) {
	var f struct {
		Worker workerFile `toml:"worker"`
	}
	if _, err := toml.DecodeFile(path, &f); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return workerFile{}, nil
		}
		return workerFile{}, fail.Inputf("%s: %v", path, err)
	}
	return f.Worker, nil
}
