// Command patcheval turns a mailing-list patch series into measured
// evidence: fetch, resolve, apply, build, boot, benchmark, compare, report.
//
// This package only parses flags and wires the stages together; every
// command lives in a cmd_<name>.go file and registers itself in init.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/redact"
	"github.com/patcheval/patcheval/internal/termsafe"
)

// command is one subcommand.
type command struct {
	name    string
	summary string // one line for the command list
	usage   string // "patcheval lore [flags] <msgid | URL>"
	// run parses args with fs (already populated by setup) and does the work.
	setup func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error
}

// Env is what every command gets.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
}

var commands = map[string]*command{}

func register(c *command) {
	if _, dup := commands[c.name]; dup {
		panic("duplicate command " + c.name)
	}
	commands[c.name] = c
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, &Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, os.Args[1:])
	stop()
	os.Exit(code)
}

// run executes one command line and returns the exit code.
func run(ctx context.Context, env *Env, args []string) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(env.Stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if args[0] == "version" || args[0] == "--version" {
		fmt.Fprintln(env.Stdout, "patcheval", Version)
		return 0
	}
	c, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(env.Stderr, "patcheval: unknown command %q (see 'patcheval help')\n", args[0])
		return 2
	}
	fs := flag.NewFlagSet("patcheval "+c.name, flag.ContinueOnError)
	// The flag package prints its error and the whole usage on a bad
	// flag; patcheval says one line instead (below) and the usage only
	// for -h.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	do := c.setup(fs)
	if err := fs.Parse(interleave(fs, args[1:])); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(env.Stderr)
			fmt.Fprintf(env.Stderr, "usage: %s\n\n%s\n\nflags:\n", c.usage, c.summary)
			fs.PrintDefaults()
			return 0
		}
		fmt.Fprintf(env.Stderr, "patcheval %s: %s\n", c.name, flagError(fs, err))
		return 2
	}
	warnDeprecatedDB(env.Stderr)
	err := do(ctx, env, fs.Args())
	if err == nil && ctx.Err() != nil && !runsUntilStopped(c.name, fs.Args()) {
		// A signal came and the command finished anyway (its last step
		// did not look): it was still interrupted, never exit 0.
		err = fail.Infra(fmt.Errorf("interrupted by a signal (%w)", ctx.Err()))
	}
	if err != nil {
		// Errors quote mail, URLs and database locators: their control
		// characters are escaped and their passwords masked, here once
		// for every command.
		fmt.Fprintf(env.Stderr, "patcheval %s: %s\n", c.name, redact.String(termsafe.Text(err.Error())))
		if ctx.Err() != nil {
			fmt.Fprintln(env.Stderr, "patcheval: interrupted; finished work is kept, re-run the same command to resume")
		}
	}
	return fail.Code(err)
}

// runsUntilStopped names the commands a signal ends normally (exit 0):
// serve, worker and watch daemon run until SIGTERM or SIGINT. Every other
// command interrupted by one exits 3 (docs/bad-input.md).
func runsUntilStopped(name string, args []string) bool {
	return name == "serve" || name == "worker" || name == "watch" && len(args) > 0 && args[0] == "daemon"
}

// interleave moves flags after positional arguments to the front, so that
// "patcheval lore <msgid> --json" works like git's commands.
func interleave(fs *flag.FlagSet, args []string) []string {
	var flags, pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) > 1 && a[0] == '-' {
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if strings.Contains(name, "=") {
				continue
			}
			f := fs.Lookup(name)
			if f == nil {
				continue
			}
			if bf, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && bf.IsBoolFlag() {
				continue
			}
			if i+1 < len(args) {
				flags = append(flags, args[i+1])
				i++
			}
			continue
		}
		pos = append(pos, a)
	}
	return append(flags, pos...)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: patcheval <command> [flags] [args]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, commands[n].summary)
	}
	fmt.Fprintln(w, "\nexit codes: 0 ok, 1 evaluated and failed, 2 bad input, 3 infrastructure")
	fmt.Fprintln(w, "run 'patcheval <command> -h' for a command's flags")
}

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"
