package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/linuxtree"
	"github.com/patcheval/patcheval/internal/xdg"
)

// defaultReleaseTree is the release-history repository tree import and
// list use without --tree.
func defaultReleaseTree() string { return filepath.Join(xdg.CacheDir(), "trees", "linux-releases.git") }

func init() {
	register(&command{
		name:    "tree",
		summary: "import Linux releases (Debian's linux-source-X.Y of any version, or a kernel.org tarball) into one release-history git repository",
		usage: "patcheval tree import [--tree PATH] [--json] VERSION...   (6.1, 6.12, 7.2, 7.2.6, 7.3.4, 7.2.12-1~bpo13+1)\n" +
			"       patcheval tree import [--tree PATH] --deb FILE | --tarball FILE --tag vX.Y.Z\n" +
			"       patcheval tree list [--tree PATH] [--json]",
		setup: func(fs *flag.FlagSet) func(ctx context.Context, env *Env, args []string) error {
			tree := fs.String("tree", defaultReleaseTree(), "release-history bare repository (created on first import)")
			asJSON := fs.Bool("json", false, "print the releases as JSON")
			deb := fs.String("deb", "", "import this linux-source .deb (checked against the SHA256 of Debian's index)")
			tarball := fs.String("tarball", "", "import this kernel.org-style tarball (.tar.xz, .tar.gz, .tar) under --tag")
			tag := fs.String("tag", "", "release tag of --tarball (vX.Y, vX.Y.Z, vX.Y-rcN)")
			return func(ctx context.Context, env *Env, args []string) error {
				if len(args) == 0 || (args[0] != "import" && args[0] != "list") {
					return fail.Inputf("want 'tree import VERSION...' or 'tree list'")
				}
				repo := &linuxtree.Repo{Path: *tree, Log: env.Stderr}
				if args[0] == "list" {
					if len(args) != 1 {
						return fail.Inputf("tree list takes no arguments")
					}
					rels, err := repo.Releases(ctx)
					if err != nil {
						return err
					}
					return printReleases(env, *asJSON, *tree, rels, nil)
				}
				results, err := treeImport(ctx, env, repo, args[1:], *deb, *tarball, *tag)
				var rels []linuxtree.Release
				for _, r := range results {
					rels = append(rels, r.Release)
				}
				if err != nil && len(results) == 0 {
					return err
				}
				if perr := printReleases(env, *asJSON, *tree, rels, results); err == nil {
					err = perr
				}
				return err
			}
		},
	})
}

// treeImport imports every release asked for, in the order given; it
// stops at the first error, keeping what was imported before it.
func treeImport(ctx context.Context, env *Env, repo *linuxtree.Repo, versions []string, deb, tarball, tag string) ([]linuxtree.Result, error) {
	if (tarball == "") != (tag == "") {
		return nil, fail.Inputf("--tarball and --tag go together")
	}
	if len(versions) == 0 && deb == "" && tarball == "" {
		return nil, fail.Inputf("tree import: name a version (6.1, 6.12, 7.2, 7.2.13, ...), --deb FILE or --tarball FILE --tag vX.Y.Z")
	}
	var reqs []linuxtree.Request
	for _, v := range versions {
		r, err := linuxtree.ParseRequest(v)
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, r)
	}
	apt := linuxtree.NewApt(xdg.CacheDir(), env.Stderr)
	var results []linuxtree.Result
	add := func(r linuxtree.Result, err error) error {
		if err != nil {
			return err
		}
		results = append(results, r)
		return nil
	}
	if tarball != "" {
		src, err := linuxtree.TarballSource(tarball, tag)
		if err != nil {
			return nil, err
		}
		if err := add(repo.ImportSource(ctx, src)); err != nil {
			return results, err
		}
	}
	if deb != "" {
		if err := add(repo.ImportDeb(ctx, apt, deb)); err != nil {
			return results, err
		}
	}
	for _, r := range reqs {
		if err := add(repo.ImportDebian(ctx, apt, linuxtree.DebsDir(xdg.CacheDir()), r)); err != nil {
			return results, fmt.Errorf("%s: %w", r, err)
		}
	}
	return results, nil
}

func printReleases(env *Env, asJSON bool, tree string, rels []linuxtree.Release, results []linuxtree.Result) error {
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		out := struct {
			Tree     string              `json:"tree"`
			Releases []linuxtree.Release `json:"releases"`
			Imports  []linuxtree.Result  `json:"imports,omitempty"`
		}{tree, rels, results}
		return enc.Encode(out)
	}
	for i, rel := range rels {
		note := ""
		if i < len(results) {
			r := results[i]
			switch {
			case r.Imported:
				note = fmt.Sprintf("  (imported in %.1f s)", r.Seconds)
			default:
				note = "  (already imported)"
			}
			if len(r.Moved) > 0 {
				note += fmt.Sprintf("; relinked %v", r.Moved)
			}
		}
		fmt.Fprintf(env.Stdout, "%-10s %.12s %s%s\n", rel.Tag, rel.Commit, rel.Title, note)
	}
	fmt.Fprintln(env.Stdout, tree)
	return nil
}
