package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/progress"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
	"github.com/patcheval/patcheval/series"
)

// loreResult is what `patcheval lore` resolved, handed to its steps
// (--tree applies, --pipeline evaluates).
type loreResult struct {
	Thread *mbox.Thread
	Series *series.Series
	AM     series.AMOptions
	// AMPath is the am mbox written with --am-out ("" without).
	AMPath string
	// JSON is true with --json (steps should not print text to Stdout).
	JSON bool
	// Extra holds what steps report under --json: lore prints one
	// document, the Series with these keys added (e.g. "evaluation",
	// "thread_numbers": the numbers reported in the thread, when any).
	Extra map[string]any
	// FetchTime is how long fetching and resolving took.
	FetchTime time.Duration
	// AnySender is --any-sender (the series resolves again from the thread).
	AnySender bool
	// Lore is the public-inbox base the thread came from (or would have):
	// the lore URL's, else --lore, $PATCHEVAL_LORE, the default.
	Lore string
}

// loreFlags are the flags that name and resolve a series.
type loreFlags struct {
	file      string
	lore      string
	noCache   bool
	version   int
	anySender bool
	linkMask  string
	maxThread string
}

func (f *loreFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&f.file, "m", "", "read the thread from an mbox `FILE` or maildir instead of lore (\"-\": stdin); a Message-ID argument picks its thread out of it")
	fs.StringVar(&f.lore, "lore", "", "public-inbox base `URL` (default $PATCHEVAL_LORE, else "+mbox.DefaultLore+")")
	fs.BoolVar(&f.noCache, "no-cache", false, "do not use or fill the cache of fetched threads")
	fs.BoolVar(&f.noCache, "C", false, "short for --no-cache (as b4 am -C)")
	fs.IntVar(&f.version, "v", 0, "use version `N` of the series (default: the newest)")
	fs.BoolVar(&f.anySender, "any-sender", false, "accept Reviewed-by/Acked-by/... trailers even when the reply was sent by someone else")
	fs.StringVar(&f.maxThread, "max-thread", "", "refuse a fetched thread larger than `SIZE` once decompressed, e.g. 512M (default $PATCHEVAL_MAX_THREAD, else 256M)")
	fs.BoolVar(&f.anySender, "S", false, "short for --any-sender (as b4 am -S, --sloppy-trailers)")
	fs.StringVar(&f.linkMask, "link-mask", series.DefaultLinkMask, "Link: trailer `mask` for the am mbox, %s is the Message-ID (\"\": no Link:)")
	fs.BoolFunc("l", "add a Link: trailer to every patch, as b4 am -l (patcheval's default; undoes an earlier --link-mask \"\")", func(string) error {
		if f.linkMask == "" {
			f.linkMask = series.DefaultLinkMask
		}
		return nil
	})
}

// source turns the flags and arguments into a thread source.
func (f *loreFlags) source(args []string) (mbox.Source, error) {
	switch {
	case f.file != "" && len(args) > 1:
		return mbox.Source{}, fail.Inputf("-m %s takes at most one Message-ID (the thread to pick out of it), got %d arguments %q", f.file, len(args), args)
	case f.file != "":
		var src mbox.Source
		if f.file == "-" {
			src = mbox.FileSource("-", false)
		} else {
			fi, err := os.Stat(f.file)
			if err != nil {
				return mbox.Source{}, fail.Inputf("-m %s: %v", f.file, err)
			}
			src = mbox.FileSource(f.file, fi.IsDir())
		}
		if len(args) == 1 {
			// -m FILE MSGID: that message's thread out of a mailbox
			// holding several (like b4 am -m FILE MSGID).
			id, err := mbox.ParseSource(args[0])
			if err != nil || id.Kind != mbox.SourceLore {
				return mbox.Source{}, fail.Inputf("-m %s %s: the argument after -m FILE must be a Message-ID (or a lore URL naming one)", f.file, args[0])
			}
			src.MsgID = id.MsgID
		}
		return src, nil
	case len(args) == 1:
		return mbox.ParseSource(args[0])
	case len(args) == 0:
		return mbox.Source{}, fail.Inputf("no thread given: want a Message-ID, a lore URL, or -m FILE")
	default:
		return mbox.Source{}, fail.Inputf("want one Message-ID or lore URL, got %d arguments %q", len(args), args)
	}
}

// resolve fetches the thread and resolves its series.
func (f *loreFlags) resolve(ctx context.Context, env *Env, args []string) (*mbox.Thread, *series.Series, error) {
	src, err := f.source(args)
	if err != nil {
		return nil, nil, err
	}
	return f.resolveSource(ctx, env, src)
}

// lore is the public-inbox base of src.
func (f *loreFlags) loreOf(src mbox.Source) string {
	if src.Base != "" {
		return src.Base
	}
	return mbox.LoreBase(f.lore)
}

func (f *loreFlags) resolveSource(ctx context.Context, env *Env, src mbox.Source) (*mbox.Thread, *series.Series, error) {
	max, err := mbox.MaxThreadSize(f.maxThread)
	if err != nil {
		return nil, nil, err
	}
	pr := progress.New(env.Stderr)
	t, err := mbox.Fetch(ctx, src, mbox.FetchOptions{
		Lore:     mbox.LoreBase(f.lore),
		NoCache:  f.noCache,
		Stdin:    env.Stdin,
		Progress: pr,
		MaxSize:  max,
	})
	pr.Done()
	if err != nil {
		return nil, nil, err
	}
	s, err := series.ResolveContext(ctx, t, series.Options{Version: f.version, AnySender: f.anySender})
	if err != nil {
		return t, nil, err
	}
	return t, s, nil
}

func init() {
	register(&command{
		name:    "lore",
		summary: "fetch a thread from lore (or an mbox), resolve its patch series, write a git-am-ready mbox",
		usage:   "patcheval lore [flags] <msgid | lore URL>   or   patcheval lore [flags] -m FILE|- [msgid]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			var lf loreFlags
			lf.add(fs)
			asJSON := fs.Bool("json", false, "print the resolved series as JSON")
			amOut := fs.String("am-out", "", "write a git-am-ready mbox to `DIR`/<slug>.mbx (like b4 am) and print its path")
			fs.StringVar(amOut, "o", "", "short for --am-out (as b4 am -o `DIR`)")
			var af applyFlags
			af.add(fs, "", "also apply the series onto this kernel git tree as a branch (see 'patcheval apply')")
			var pf pipelineFlags
			pf.add(fs)
			return func(ctx context.Context, env *Env, args []string) error {
				start := time.Now()
				src, err := lf.source(args)
				if err != nil {
					return err
				}
				// Flags, pipeline and tree before any network: a typo
				// must not cost a fetch.
				if err := pf.precheck(af); err != nil {
					return err
				}
				t, s, err := lf.resolveSource(ctx, env, src)
				if err != nil {
					return err
				}
				lr := &loreResult{Thread: t, Series: s, AM: series.AMOptions{LinkMask: lf.linkMask}, JSON: *asJSON,
					FetchTime: time.Since(start), Lore: lf.loreOf(src), AnySender: lf.anySender}
				nums := numbers.Read(t)
				if !*asJSON {
					// Subjects, names, notes and quoted numbers come from
					// mail: their control characters are escaped (an ESC
					// or OSC sequence would drive the terminal).
					err := runsText(env.Stdout, func(w io.Writer) error {
						if err := s.WriteSummary(w, lr.AM); err != nil {
							return err
						}
						return writeThreadNumbers(w, nums)
					})
					if err != nil {
						return fail.Infraf("writing summary: %w", err)
					}
				} else if len(nums) > 0 {
					lr.Extra = map[string]any{"thread_numbers": nums}
				}
				if *amOut != "" {
					if lr.AMPath, err = writeAM(s, *amOut, lr.AM); err != nil {
						return err
					}
					out := env.Stdout
					if *asJSON {
						out = env.Stderr
					}
					if len(s.Missing) > 0 {
						fmt.Fprintf(env.Stderr, "warning: the series is incomplete (missing %v); the am mbox has the patches found\n", s.Missing)
					}
					for i, p := range s.Patches {
						if p.Broken != "" {
							fmt.Fprintf(env.Stderr, "warning: patch %d/%d is cut short, git am will refuse it: %s\n", i+1, len(s.Patches), p.Broken)
						}
					}
					fmt.Fprintln(out, lr.AMPath)
				}
				var stepErr error
				switch {
				case pf.wanted() != "":
					// The pipeline applies the series onto its own base.
					stepErr = pf.run(ctx, env, lr, af)
				case af.tree != "":
					out := env.Stdout
					if lr.JSON {
						out = env.Stderr
					}
					_, stepErr = af.run(ctx, lr.Series, lr.AM, out, nil)
				}
				if *asJSON {
					// One document, printed also when a step failed: what
					// was resolved (and evaluated) is not lost.
					if err := writeLoreJSON(env.Stdout, lr); err != nil {
						return err
					}
				}
				return stepErr
			}
		},
	})
}

// writeLoreJSON prints the Series, with the steps' Extra keys added.
func writeLoreJSON(w io.Writer, lr *loreResult) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if len(lr.Extra) == 0 {
		if err := enc.Encode(lr.Series); err != nil {
			return fail.Infraf("writing JSON: %w", err)
		}
		return nil
	}
	data, err := json.Marshal(lr.Series)
	if err != nil {
		return fail.Infraf("writing JSON: %w", err)
	}
	doc := map[string]any{}
	if err := json.Unmarshal(data, &doc); err != nil {
		return fail.Infraf("writing JSON: %w", err)
	}
	for k, v := range lr.Extra {
		doc[k] = v
	}
	if err := enc.Encode(doc); err != nil {
		return fail.Infraf("writing JSON: %w", err)
	}
	return nil
}

// writeAM writes DIR/<slug>.mbx and returns its path.
func writeAM(s *series.Series, dir string, opt series.AMOptions) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fail.Inputf("--am-out %s: %v", dir, err)
	}
	path := filepath.Join(dir, s.Slug()+".mbx")
	f, err := os.Create(path)
	if err != nil {
		return "", fail.Inputf("--am-out: %v", err)
	}
	if err := s.WriteAM(f, opt); err != nil {
		f.Close()
		return "", fail.Infraf("%s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fail.Infraf("%s: %w", path, err)
	}
	return path, nil
}
