// Command tar2git turns a tar stream into a `git fast-import` stream: one
// commit holding every regular file and symlink of the archive, with its
// leading directory stripped (internal/tar2git does the work).
//
//	xz -dc linux.tar.xz | tar2git -message "Linux 6.1" -tag v6.1-debian |
//		git --git-dir=repo.git fast-import --done
//
// scripts/linux-tree.sh uses it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/patcheval/patcheval/internal/tar2git"
)

func main() {
	var o tar2git.Options
	var date string
	flag.StringVar(&o.Branch, "branch", "master", "branch the commit goes to")
	flag.StringVar(&o.Tag, "tag", "", "lightweight tag on the commit (none if empty)")
	flag.StringVar(&o.Message, "message", "", "commit message (required)")
	flag.StringVar(&o.Name, "name", "patcheval import", "author and committer name")
	flag.StringVar(&o.Email, "email", "import@patcheval.invalid", "author and committer email")
	flag.StringVar(&date, "date", "2022-12-11T14:15:00Z", `author and committer date (RFC 3339), or "archive": the newest mtime in the archive`)
	flag.BoolVar(&o.Strip, "strip", true, "strip the archive's one leading directory")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: tar2git -message MSG [-tag TAG] <archive.tar | git fast-import --done")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 || o.Message == "" {
		flag.Usage()
		os.Exit(2)
	}
	if date != "archive" {
		t, err := time.Parse(time.RFC3339, date)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tar2git: -date %q: %v\n", date, err)
			os.Exit(2)
		}
		o.Date = t
	}
	out := bufio.NewWriterSize(os.Stdout, 1<<20)
	res, err := tar2git.Convert(bufio.NewReaderSize(os.Stdin, 1<<20), out, o)
	if err == nil {
		err = out.Flush()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "tar2git: %v\n", err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "tar2git: %d files\n", res.Files)
}
