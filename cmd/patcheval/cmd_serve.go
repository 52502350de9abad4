package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/service"
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func init() {
	register(&command{
		name:    "serve",
		summary: "run the service: job queue (River), HTTP API under /api/v1 and the dashboard",
		usage:   "patcheval serve [--listen 127.0.0.1:8080] [--public-url URL] [--db URL] [--boots-at-once N] [--work all|coordinator|detect] [--compiler-cache kcc|ccache|none] [--token-file F] [--allow-tree PATH]... [--allow-host NAME[:PORT]]...",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			listen := fs.String("listen", "127.0.0.1:8080", "`address` to listen on; anything but loopback needs --token-file")
			database := new(string)
			dbFlag(fs, database, "database: a SQLite `file` or sqlite:PATH (default <state dir>/patcheval.db), postgres://USER@HOST/DB or libpq \"host=H dbname=D\" (password from ~/.pgpass or $PGPASSFILE, not the command line)")
			workers, buildWorkers, checkAtOnce := atOnceFlags(fs)
			jobs := fs.Int("j", 0, "make -j budget shared by all kernel builds (default: number of CPUs)")
			tokenFile := fs.String("token-file", "", "`file` holding the token mutating requests must send as Authorization: Bearer")
			publicRead := fs.Bool("public-read", false, "with --token-file: serve pages and GET requests without the token")
			var allow stringList
			fs.Var(&allow, "allow-tree", "kernel tree `PATH` submissions may use (repeatable; a submitted --tree must be it or inside it)")
			lore := fs.String("lore", "", "public-inbox base `URL` to fetch threads from (default $PATCHEVAL_LORE, else https://lore.kernel.org)")
			from := fs.String("from", "", "reply drafts' sender \"Name <email>\" (default: git config)")
			grace := fs.Duration("grace", 30*time.Second, "on SIGTERM, how long running jobs may finish before they are cancelled (and retried on the next start)")
			cacheDir := fs.String("cache-dir", "", "cache directory (default $PATCHEVAL_CACHE_DIR or ~/.cache/patcheval)")
			work := fs.String("work", "all", "the stages serve runs itself: all (every arch and SSH target: no workers needed), coordinator (apply, more and report: builds and boots wait for 'patcheval worker' processes), or detect (coordinator plus what this machine's toolchains and QEMU can run)")
			noSeriesBisect := fs.Bool("no-series-bisect", false, "when an evaluation's whole series (of several patches) regresses, do not bisect inside the series before it is done (its report and the bots' replies then do not name the patch)")
			ccache := fs.String("compiler-cache", "kcc", "the builds' compiler cache (with --work all or detect; a worker has its own): kcc (patcheval's, keyed by preprocessed tokens), ccache or none")
			publicURL := fs.String("public-url", "", "the dashboard's `URL` as others reach it, for the links in Patchwork checks, GitHub statuses and mails (default http://<listen>); requests may name its host")
			var allowHosts stringList
			fs.Var(&allowHosts, "allow-host", "another `NAME[:PORT]` requests may address serve by (repeatable; default only the listen address, localhost forms and --public-url's host: other Host headers get 421, against DNS rebinding)")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) > 0 {
					return fail.Inputf("serve: unexpected arguments %q", args)
				}
				if err := checkAtOnce(env, "serve"); err != nil {
					return err
				}
				if err := compilerCacheFlag(*ccache); err != nil {
					return err
				}
				var caps *service.Capabilities
				switch *work {
				case "all":
				case "coordinator":
					caps = &service.Capabilities{Coordinator: true, Cores: runtime.NumCPU()}
				case "detect":
					c, err := service.DetectCapabilities(ctx, nil)
					if err != nil {
						return err
					}
					c.Coordinator = true
					caps = &c
				default:
					return fail.Inputf("--work %q: want all, coordinator or detect", *work)
				}
				cfg := service.Config{Work: caps, Database: *database, CacheDir: *cacheDir, Jobs: *jobs, CompilerCache: *ccache, BootWorkers: *workers,
					BuildWorkers: *buildWorkers, Grace: *grace, PublicRead: *publicRead, PublicURL: *publicURL, AllowHosts: allowHosts, AllowTrees: allow, Lore: *lore,
					Log: env.Stderr, SeriesBisect: !*noSeriesBisect}
				if *tokenFile != "" {
					tok, err := service.ReadToken(*tokenFile)
					if err != nil {
						return err
					}
					cfg.Token = tok
				} else if !service.IsLoopback(*listen) {
					return fail.Inputf("--listen %s is not a loopback address: give --token-file F (mutating requests then need Authorization: Bearer)", *listen)
				}
				if *publicRead && *tokenFile == "" {
					return fail.Inputf("--public-read needs --token-file (without a token everything is open on loopback anyway)")
				}
				sender, err := draftSender(*from, "")
				if err != nil {
					return err
				}
				cfg.From = sender
				// serve's features (serve_assembly.go) on the core.
				bind, err := assembleServe(&cfg, serveOptions{Listen: *listen, PublicURL: *publicURL, Log: env.Stderr})
				if err != nil {
					return err
				}
				s, err := service.New(ctx, cfg)
				if err != nil {
					return err
				}
				defer s.Close()
				bind(s)
				ln, err := net.Listen("tcp", *listen)
				if err != nil {
					return fail.Inputf("--listen %s: %v", *listen, err)
				}
				fmt.Fprintf(env.Stdout, "patcheval serve: listening on http://%s/\n", ln.Addr())
				fmt.Fprintf(env.Stdout, "database: %s\nreports:  %s\n", s.DatabasePath(), filepath.Dir(s.OutDir(0)))
				if len(cfg.Token) > 0 {
					fmt.Fprintf(env.Stdout, "token:    required (from %s)%s\n", *tokenFile, map[bool]string{true: " for mutating requests; reads are public"}[*publicRead])
				}
				return s.Run(ctx, ln)
			}
		},
	})
}

// atOnceFlags are serve's and worker's --boots-at-once and
// --builds-at-once, with their old names (--workers, --build-workers:
// easily read as the worker command) kept as deprecated aliases; check
// warns about the old names and refuses values below 1.
func atOnceFlags(fs *flag.FlagSet) (boots, builds *int, check func(env *Env, cmd string) error) {
	boots = fs.Int("boots-at-once", 1, "boots run at once on this machine (boots beside each other disturb each other's timings)")
	fs.IntVar(boots, "workers", 1, "deprecated name of --boots-at-once")
	builds = fs.Int("builds-at-once", service.DefaultBuildWorkers, "kernel builds run at once; they share the -j budget")
	fs.IntVar(builds, "build-workers", service.DefaultBuildWorkers, "deprecated name of --builds-at-once")
	return boots, builds, func(env *Env, cmd string) error {
		fs.Visit(func(f *flag.Flag) {
			if n, old := map[string]string{"workers": "boots-at-once", "build-workers": "builds-at-once"}[f.Name]; old {
				fmt.Fprintf(env.Stderr, "patcheval %s: --%s is deprecated: use --%s\n", cmd, f.Name, n)
			}
		})
		if *boots < 1 || *builds < 1 {
			return fail.Inputf("--boots-at-once and --builds-at-once must be at least 1")
		}
		return nil
	}
}
