package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines"
	"github.com/patcheval/patcheval/pipelines/service"
)

// defaultServer is where submit finds `patcheval serve`.
const defaultServer = "http://127.0.0.1:8080"

func init() {
	register(&command{
		name:    "submit",
		summary: "queue an evaluation on a running 'patcheval serve'; --wait follows it to the end",
		usage:   "patcheval submit <msgid | -m FILE> --pipeline NAME|FILE [--arch A] [--tree PATH] [--per-patch] [--revert-if-merged] [--server URL] [--wait] [--json]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			file := fs.String("m", "", "send the thread from an mbox `FILE` (\"-\": stdin) instead of a Message-ID")
			pipeline := fs.String("pipeline", "", "evaluate with `NAME|FILE`: default, a shipped pipeline, or a TOML file (sent by content: the service needs a token)")
			archFlag := fs.String("arch", "", "with --pipeline default: comma-separated `arches` (default: those the series touches)")
			tree := fs.String("tree", "", "kernel tree `PATH` on the server (one of its --allow-tree paths)")
			base := fs.String("base", "", "base `ref` (default: the series' base-commit when the tree has it, else the pipeline's [tree] base, else the tree's HEAD)")
			boots := fs.Int("boots", 0, "boots per variant (default: the pipeline's repeats.boots)")
			version := fs.Int("v", 0, "use version `N` of the series (default: the newest)")
			perPatch := fs.Bool("per-patch", false, "also measure after each patch of the series once it is reported (as lore --per-patch); the report gains a per-patch table")
			revertIfMerged := fs.Bool("revert-if-merged", false, "when the base already has the whole series, measure the base with the series reverted against the base as it is (as lore --revert-if-merged); without it such a series is refused (exit 2)")
			server := fs.String("server", "", "service `URL` (default $PATCHEVAL_SERVER, else "+defaultServer+")")
			tokenFile := fs.String("token-file", "", "`file` with the service's token (default $PATCHEVAL_TOKEN_FILE)")
			wait := fs.Bool("wait", false, "follow the evaluation's progress until it ends; exit 0 done, 1 failed, 3 cancelled")
			asJSON := fs.Bool("json", false, "print the service's JSON answer (with --wait: the finished evaluation)")
			return func(ctx context.Context, env *Env, args []string) error {
				req := service.SubmitRequest{Pipeline: *pipeline, Arch: *archFlag, Base: *base, Boots: *boots, Version: *version, PerPatch: *perPatch, RevertIfMerged: *revertIfMerged}
				switch {
				case *file != "" && len(args) > 0:
					return fail.Inputf("give either -m FILE or a Message-ID, not both")
				case *file == "" && len(args) != 1:
					return fail.Inputf("want one Message-ID (or -m FILE), got %d arguments", len(args))
				case *file == "-":
					b, err := io.ReadAll(env.Stdin)
					if err != nil {
						return fail.Inputf("-m -: %v", err)
					}
					req.Mbox = string(b)
				case *file != "":
					b, err := os.ReadFile(*file)
					if err != nil {
						return fail.Inputf("-m %s: %v", *file, err)
					}
					req.Mbox = string(b)
				default:
					req.MsgID = args[0]
				}
				if *pipeline == "" {
					return fail.Inputf("--pipeline NAME is required (default, %s, or a TOML file)", strings.Join(pipelines.List(), ", "))
				}
				if err := submitPipelineFile(&req); err != nil {
					return err
				}
				if *tree != "" {
					abs, err := filepath.Abs(*tree)
					if err != nil {
						return fail.Inputf("--tree %s: %v", *tree, err)
					}
					req.Tree = abs
				}
				c, err := newAPIClient(*server, *tokenFile)
				if err != nil {
					return err
				}
				var res service.SubmitResponse
				if err := c.do(ctx, http.MethodPost, "/api/v1/evaluations", req, &res); err != nil {
					return err
				}
				id := res.Evaluation.ID
				if !*asJSON || !*wait {
					if *asJSON {
						return printJSON(env.Stdout, res)
					}
					what := "submitted"
					if !res.Created {
						what = "already known (" + res.Evaluation.Status + ")"
					}
					fmt.Fprintf(env.Stdout, "evaluation %d %s: %s\n", id, what, res.URL)
				}
				if !*wait {
					return nil
				}
				status, err := c.follow(ctx, id, env.Stderr)
				if err != nil {
					return err
				}
				if *asJSON {
					var full service.EvaluationResponse
					if err := c.do(ctx, http.MethodGet, fmt.Sprintf("/api/v1/evaluations/%d", id), nil, &full); err != nil {
						return err
					}
					if err := printJSON(env.Stdout, full); err != nil {
						return err
					}
				} else if status == "done" {
					text, err := c.raw(ctx, fmt.Sprintf("/api/v1/evaluations/%d/report?format=text", id))
					if err != nil {
						return err
					}
					fmt.Fprintf(env.Stdout, "\n%s\nevaluation %d done: %s\n", text, id, res.URL)
				}
				switch status {
				case "done":
					return nil
				case "cancelled":
					return fail.Infraf("evaluation %d was cancelled", id)
				default:
					return fail.Failedf("evaluation %d %s (see %s)", id, status, res.URL)
				}
			}
		},
	})
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// apiClient talks to a patcheval serve.
type apiClient struct {
	base  string
	token string
	http  *http.Client
}

func newAPIClient(server, tokenFile string) (*apiClient, error) {
	if server == "" {
		server = os.Getenv("PATCHEVAL_SERVER")
	}
	if server == "" {
		server = defaultServer
	}
	if !strings.HasPrefix(server, "http://") && !strings.HasPrefix(server, "https://") {
		return nil, fail.Inputf("--server %q: want an http:// or https:// URL", server)
	}
	c := &apiClient{base: strings.TrimRight(server, "/"), http: &http.Client{Timeout: 5 * time.Minute}}
	if tokenFile == "" {
		tokenFile = os.Getenv("PATCHEVAL_TOKEN_FILE")
	}
	if tokenFile != "" {
		tok, err := service.ReadToken(tokenFile)
		if err != nil {
			return nil, err
		}
		c.token = string(tok)
	}
	return c, nil
}

func (c *apiClient) request(ctx context.Context, method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fail.Inputf("--server %s: %v", c.base, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fail.Infraf("no patcheval service at %s (start one with 'patcheval serve'): %w", c.base, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e service.APIError
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			msg = e.Error
			if e.Field != "" {
				msg = e.Field + ": " + msg
			}
		}
		err := fmt.Errorf("%s %s: %s (%s)", method, path, msg, resp.Status)
		if resp.StatusCode >= 400 && resp.StatusCode < 500 {
			return nil, fail.Input(err)
		}
		return nil, fail.Infra(err)
	}
	return resp, nil
}

func (c *apiClient) do(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.request(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fail.Infraf("%s %s: bad answer: %w", method, path, err)
	}
	return nil
}

func (c *apiClient) raw(ctx context.Context, path string) (string, error) {
	resp, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// follow prints evaluation id's progress (server-sent events) until it
// is neither queued nor running, and returns its final status. A dropped
// stream is reconnected.
func (c *apiClient) follow(ctx context.Context, id int64, w io.Writer) (string, error) {
	status := ""
	for attempt := 0; ; attempt++ {
		resp, err := c.request(ctx, http.MethodGet, fmt.Sprintf("/api/v1/evaluations/%d/events", id), nil)
		if err == nil {
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			event := ""
			for sc.Scan() {
				line := sc.Text()
				switch {
				case strings.HasPrefix(line, "event: "):
					event = strings.TrimPrefix(line, "event: ")
				case strings.HasPrefix(line, "data: "):
					data := strings.TrimPrefix(line, "data: ")
					if event == "status" {
						status = data
					} else {
						fmt.Fprintln(w, data)
					}
				case line == "":
					event = ""
				}
			}
			resp.Body.Close()
			if status != "" && status != service.StatusQueued && status != "running" {
				return status, nil
			}
		} else if fail.KindOf(err) == fail.KindInput {
			return "", err
		}
		if ctx.Err() != nil {
			return "", fail.Infra(ctx.Err())
		}
		if attempt > 0 && err != nil && attempt%10 == 0 {
			fmt.Fprintf(w, "still waiting for %s: %v\n", c.base, err)
		}
		select {
		case <-ctx.Done():
			return "", fail.Infra(ctx.Err())
		case <-time.After(2 * time.Second):
		}
		if errors.Is(err, context.Canceled) {
			return "", fail.Infra(err)
		}
	}
}

// submitPipelineFile sends a --pipeline that names a file by content
// (lore --pipeline FILE's evaluation on the service), after checking it
// here, so that a bad file is named with its line before any request.
func submitPipelineFile(req *service.SubmitRequest) error {
	if _, isDefault := pipelines.SplitDefault(req.Pipeline); isDefault {
		return nil
	}
	if _, err := pipelines.Builtin(req.Pipeline); err == nil {
		return nil
	}
	if st, err := os.Stat(req.Pipeline); err != nil || st.IsDir() {
		return nil // a name: the service says whether it has it
	}
	data, err := os.ReadFile(req.Pipeline)
	if err != nil {
		return fail.Inputf("--pipeline %s: %v", req.Pipeline, err)
	}
	if _, err := pipelines.Parse(data, req.Pipeline); err != nil {
		return err
	}
	req.PipelineTOML, req.Pipeline = string(data), ""
	return nil
}
