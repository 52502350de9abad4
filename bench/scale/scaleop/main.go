// Command scaleop runs one of patcheval's git operations once, in its own
// process, so that bench/scale.sh can time it and read its peak RSS beside
// the git CLI doing the same. It prints the operation's result on one line
// (a hash, a count, a tree) for the script to check against git's.
//
//	scaleop resolve REPO REV            # commit hash
//	scaleop apply REPO BASE BRANCH MBOX # tree of the applied commit
//	scaleop checkout REPO REV DIR       # files written, removed
//	scaleop range REPO GOOD BAD         # first-parent commits in GOOD..BAD
//	scaleop tags URL                    # version tags (ls-remote), in order
//	scaleop fetch REPO URL TAG          # commit fetched
//	scaleop push REPO URL REV REF       # commits, objects sent (gittree.Push, as the GitHub reporter does)
//	scaleop serve ROOT                  # smart-HTTP server (git http-backend) on loopback; prints its URL
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/experiments/bisect"
	"github.com/patcheval/patcheval/pipelines/experiments/watch"
	"github.com/patcheval/patcheval/series"
	"github.com/patcheval/patcheval/series/apply"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintf(os.Stderr, "scaleop: %v\n", err)
		os.Exit(1)
	}
}

func need(args []string, n int, usage string) error {
	if len(args) != n {
		return fmt.Errorf("usage: scaleop %s", usage)
	}
	return nil
}

// op is one operation: its arguments' count and usage, and what it does.
type op struct {
	n     int
	usage string
	do    func(ctx context.Context, args []string) error
}

var ops = map[string]op{
	// Nothing: the cost of starting a process that links patcheval's
	// packages (runtime and package init), the floor under every row.
	"start":    {0, "start", func(context.Context, []string) error { return nil }},
	"resolve":  {2, "resolve REPO REV", resolve},
	"apply":    {4, "apply REPO BASE BRANCH MBOX", applyMbox},
	"checkout": {3, "checkout REPO REV DIR", checkout},
	"range":    {3, "range REPO GOOD BAD", firstParentRange},
	"tags":     {1, "tags URL", tags},
	"fetch":    {3, "fetch REPO URL TAG", fetch},
	"push":     {4, "push REPO URL REV REF", push},
	"serve":    {1, "serve ROOT", serve},
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: scaleop start|resolve|apply|checkout|range|tags|fetch|serve ...")
	}
	name, args := args[0], args[1:]
	o, ok := ops[name]
	if !ok {
		return fmt.Errorf("unknown operation %q", name)
	}
	if err := need(args, o.n, o.usage); err != nil {
		return err
	}
	return o.do(context.Background(), args)
}

// resolve prints the commit REV names.
func resolve(_ context.Context, args []string) error {
	c, err := gittree.Resolve(args[0], args[1])
	if err != nil {
		return err
	}
	fmt.Println(c.Hash)
	return nil
}

// applyMbox applies the series in MBOX on BASE as BRANCH and prints the
// last commit's tree.
func applyMbox(ctx context.Context, args []string) error {
	f, err := os.Open(args[3])
	if err != nil {
		return err
	}
	msgs, err := mbox.Parse(f, args[3])
	f.Close()
	if err != nil {
		return err
	}
	s, err := series.Resolve(mbox.NewThread(msgs, args[3]), series.Options{})
	if err != nil {
		return err
	}
	res, err := apply.Apply(ctx, args[0], apply.FromSeries(s, series.DefaultAMOptions()), apply.Options{
		Base: args[1], Branch: args[2], CommitterName: "Bench Committer", CommitterEmail: "committer@example.org",
		CommitterDate: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	})
	if err != nil {
		return err
	}
	fmt.Println(res.Commits[len(res.Commits)-1].Tree)
	return nil
}

// checkout checks REV out into DIR and prints the files written and
// removed.
func checkout(ctx context.Context, args []string) error {
	st, err := gittree.Checkout(ctx, args[0], args[1], args[2])
	if err != nil {
		return err
	}
	fmt.Printf("%d written, %d removed\n", st.Written, st.Removed)
	return nil
}

// firstParentRange prints the count, first and last of the first-parent
// commits in GOOD..BAD.
func firstParentRange(_ context.Context, args []string) error {
	_, _, cs, err := bisect.FirstParentRange(args[0], args[1], args[2], 1<<30)
	if err != nil {
		return err
	}
	fmt.Println(len(cs), cs[0].Hash, cs[len(cs)-1].Hash)
	return nil
}

// tags prints URL's version tags, in order.
func tags(ctx context.Context, args []string) error {
	list, err := watch.ListTags(ctx, args[0], "v*")
	if err != nil {
		return err
	}
	var names []string
	for _, t := range list {
		if _, ok := watch.ParseVersion(t.Name); ok {
			names = append(names, t.Name)
		}
	}
	fmt.Println(strings.Join(names, " "))
	return nil
}

// fetch fetches TAG from URL into REPO and prints its commit.
func fetch(ctx context.Context, args []string) error {
	c, err := watch.FetchTag(ctx, args[0], args[1], args[2])
	if err != nil {
		return err
	}
	fmt.Println(c)
	return nil
}

// push pushes REV to URL as REF and prints the commits and objects sent
// and the commits walked.
func push(ctx context.Context, args []string) error {
	r, st, _, err := gittree.Open(args[0], 64)
	if err != nil {
		return err
	}
	defer st.Close()
	c, err := gittree.ResolveIn(r, args[2])
	if err != nil {
		return err
	}
	ps, err := gittree.Push(ctx, r, args[1], nil, c.Hash, plumbing.ReferenceName(args[3]))
	if err != nil {
		return err
	}
	fmt.Println(ps.Commits, ps.Objects, ps.Walked)
	return nil
}

// serve serves ROOT's repositories over smart HTTP (git http-backend) on
// loopback, printing the URL first.
func serve(_ context.Context, args []string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("http://%s\n", ln.Addr())
	h := &cgi.Handler{Path: "/usr/lib/git-core/git-http-backend",
		Env: []string{"GIT_PROJECT_ROOT=" + args[0], "GIT_HTTP_EXPORT_ALL=1"}}
	return http.Serve(ln, h)
}
