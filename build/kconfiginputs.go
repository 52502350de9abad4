package build

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// srctreeRef finds the files Kconfig runs or reads by path:
// $(shell,$(srctree)/scripts/cc-version.sh ...),
// $(success,$(srctree)/arch/powerpc/tools/gcc-check-mprofile-kernel.sh ...).
var srctreeRef = lazyre.New(`\$\(srctree\)/([A-Za-z0-9_.+/-]+)`)

// kconfigInputs names, by a hash, everything in the tree (a tree object of
// the repository at repo) a base config target can read for srcArch:
//
//   - every file named Kconfig* (all arches: a source line may name any
//     of them, and 6.1's 1,700 source lines name only Kconfig* files);
//   - every directory named configs (arch/*/configs, kernel/configs:
//     tiny.config, defconfigs and the fragments merge_config.sh reads);
//   - the files directly in scripts/ (Kconfig.include, Kbuild.include,
//     Makefile.*, the *-version.sh probes) and the scripts/kconfig and
//     scripts/basic directories (the front end and fixdep, both built);
//   - the top-level Makefile (the version in the .config's header) and
//     arch/<srcArch>/Makefile (included for config targets:
//     KBUILD_DEFCONFIG);
//   - every path a Kconfig file names as $(srctree)/..., such as
//     arch/powerpc/tools/gcc-check-mprofile-kernel.sh.
//
// Two commits with the same inputs get the same base config from the
// same toolchain and make variables, so a bisection's steps, whose trees
// differ but rarely in these, share one make tinyconfig.
func kconfigInputs(repo, tree, srcArch string) (string, error) {
	r, st, _, err := gittree.Open(repo, 16)
	if err != nil {
		return "", err
	}
	defer st.Close()
	root, err := r.TreeObject(plumbing.NewHash(tree))
	if err != nil {
		return "", fmt.Errorf("tree %s: %w", tree, err)
	}
	var lines []string
	var kconfigs []plumbing.Hash
	add := func(kind, p string, h plumbing.Hash) { lines = append(lines, kind+" "+p+" "+h.String()) }
	var walk func(t *object.Tree, dir string) error
	walk = func(t *object.Tree, dir string) error {
		for _, e := range t.Entries {
			p := dir + e.Name
			switch {
			case e.Mode == filemode.Submodule:
				continue
			case e.Mode == filemode.Dir && (e.Name == "configs" || p == "scripts/kconfig" || p == "scripts/basic"):
				add("tree", p, e.Hash)
			case e.Mode == filemode.Dir:
				sub, err := r.TreeObject(e.Hash)
				if err != nil {
					return fmt.Errorf("tree %s of %s: %w", p, tree, err)
				}
				if err := walk(sub, p+"/"); err != nil {
					return err
				}
			case strings.HasPrefix(e.Name, "Kconfig"):
				add("file", p, e.Hash)
				if e.Mode != filemode.Symlink {
					kconfigs = append(kconfigs, e.Hash)
				}
			case dir == "scripts/" || p == "Makefile" || p == "arch/"+srcArch+"/Makefile":
				add("file", p, e.Hash)
			}
		}
		return nil
	}
	if err := walk(root, ""); err != nil {
		return "", err
	}
	refs := map[string]bool{}
	for _, h := range kconfigs {
		b, err := r.BlobObject(h)
		if err != nil {
			return "", fmt.Errorf("Kconfig blob %s: %w", h, err)
		}
		rd, err := b.Reader()
		if err != nil {
			return "", err
		}
		data, err := io.ReadAll(rd)
		rd.Close()
		if err != nil {
			return "", err
		}
		for _, m := range srctreeRef.FindAllSubmatch(data, -1) {
			refs[strings.TrimRight(string(m[1]), "/.")] = true
		}
	}
	for p := range refs {
		if e, err := root.FindEntry(p); err == nil {
			add("ref", p, e.Hash)
		} else {
			lines = append(lines, "ref "+p+" absent")
		}
	}
	sort.Strings(lines)
	sum := sha256.New()
	for _, l := range lines {
		io.WriteString(sum, l+"\n")
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}
