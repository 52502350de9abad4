package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/patcheval/patcheval/pipelines/bots/b4check"
	"github.com/patcheval/patcheval/pipelines/service"
)

func init() {
	register(&command{
		name:    "b4-check",
		summary: "answer b4 review's CI check (b4.review-series-check-cmd / b4.review-perpatch-check-cmd) from a patcheval serve",
		usage:   "patcheval b4-check [--server URL] [--token-file FILE] [--pipeline NAME] [--tree PATH] [--report-only] < message",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			server := fs.String("server", "", "service `URL` (default $PATCHEVAL_SERVER)")
			tokenFile := fs.String("token-file", "", "`file` with the service's token (default $PATCHEVAL_TOKEN_FILE)")
			pipeline := fs.String("pipeline", "default", "pipeline `name` to queue a series with when the service has no evaluation of it")
			tree := fs.String("tree", "", "kernel tree `PATH` on the server for queued series (one of its --allow-tree)")
			arch := fs.String("arch", "", "architecture for the default pipeline, when the series touches none")
			reportOnly := fs.Bool("report-only", false, "never queue: a series without an evaluation reports nothing")
			mode := fs.String("mode", "auto", "`auto`: a cover letter is the series, a patch one patch; series; patch")
			timeout := fs.Duration("timeout", b4check.DefaultTimeout, "answer within this `duration`, with what is known by then")
			tool := fs.String("tool", "patcheval", "the `name` of b4's result column")
			return func(ctx context.Context, env *Env, args []string) error {
				cfg := b4check.Config{Server: *server, Pipeline: *pipeline, Tree: *tree, Arch: *arch, ReportOnly: *reportOnly,
					Tool: *tool, Timeout: *timeout}
				if cfg.Server == "" {
					cfg.Server = os.Getenv("PATCHEVAL_SERVER")
				}
				var res []b4check.Result
				switch *mode {
				case "auto":
				case "series":
					cfg.Mode = b4check.Series
				case "patch":
					cfg.Mode = b4check.Patch
				default:
					res = append(res, b4check.Result{Tool: cfg.Tool, Status: b4check.Warn, Summary: fmt.Sprintf("--mode %q: want auto, series or patch", *mode)})
				}
				if *tokenFile == "" {
					*tokenFile = os.Getenv("PATCHEVAL_TOKEN_FILE")
				}
				if *tokenFile != "" && res == nil {
					tok, err := service.ReadToken(*tokenFile)
					if err != nil {
						res = append(res, b4check.Result{Tool: cfg.Tool, Status: b4check.Warn, Summary: err.Error()})
					}
					cfg.Token = string(tok)
				}
				if res == nil {
					raw, err := io.ReadAll(io.LimitReader(env.Stdin, 64<<20))
					if err != nil {
						res = append(res, b4check.Result{Tool: cfg.Tool, Status: b4check.Warn, Summary: "reading the message on stdin: " + err.Error()})
					} else {
						res = b4check.Check(ctx, cfg, raw, os.Getenv("B4_TRACKING_FILE"))
					}
				}
				if res == nil {
					res = []b4check.Result{}
				}
				enc := json.NewEncoder(env.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(res)
			}
		},
	})
}
