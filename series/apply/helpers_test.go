package apply

import (
	"github.com/patcheval/patcheval/internal/gittree/gittest"
	"github.com/patcheval/patcheval/internal/testenv"
)

// linuxTree is the imported 6.1 tree (read-only: clone it before writing).
var linuxTree = testenv.LinuxTree

// The git test helpers are gittest's.
var (
	cloneBare  = gittest.CloneBare
	gitRun     = gittest.Run
	gitCmd     = gittest.Cmd
	lsTree     = gittest.LsTree
	diffLists  = gittest.DiffLists
	newRepo    = gittest.NewRepo
	writeFiles = gittest.WriteFiles
	dirListing = gittest.DirListing
)
