// Package userland gives the guest the users' own benchmark tools
// (stress-ng, perf) as Debian built them for the guest's architecture:
// Build resolves the tools' packages and the shared libraries they depend
// on from apt's package lists (`apt-cache depends` / `apt-cache show`),
// downloads them with `apt-get download`, verifies their SHA256 against
// the lists, unpacks them with `dpkg-deb -x` and writes a newc archive
// holding the tools and exactly the shared objects their ELF headers need
// (DT_NEEDED, PT_INTERP), which the QEMU target appends to the agent's
// initramfs. No binfmt, no chroot, no root: only apt's lists must know the
// architecture, which .ci/install-deps sets up (`dpkg --add-architecture`),
// or, for riscv64, which bookworm does not build, a private apt state of
// trixie (internal/debian; the arch row's DebSuite).
//
// Archives are cached by content under <cache>/userland: the key hashes
// the tools, the resolved package versions and their SHA256 sums, so a
// new Debian point release gives a new archive and an unchanged one is
// reused without network.
package userland

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/patcheval/patcheval/evaluate/guest/initramfs"
	"github.com/patcheval/patcheval/internal/arch"
	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/digest"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/xdg"
)

// Tool is a benchmark program the guest can run.
type Tool struct {
	Name    string // stress-ng, perf
	Package string // the Debian package that ships it
	Path    string // its path in the guest (and in the package)
}

// Tools are the tools Build knows.
var Tools = map[string]Tool{
	"stress-ng": {Name: "stress-ng", Package: "stress-ng", Path: "/usr/bin/stress-ng"},
	"perf":      {Name: "perf", Package: "linux-perf", Path: "/usr/bin/perf"},
	// What an emulated lab host (evaluate/target/testlab) runs: an SSH server,
	// kexec and a shell with the usual commands.
	"sshd":    {Name: "sshd", Package: "openssh-server", Path: "/usr/sbin/sshd"},
	"kexec":   {Name: "kexec", Package: "kexec-tools", Path: "/sbin/kexec"},
	"busybox": {Name: "busybox", Package: "busybox-static", Path: "/bin/busybox"},
}

// DebArch maps a kernel architecture (ppc64le, arm64, x86_64, riscv64 and their
// aliases) to Debian's name and the multiarch triplet (internal/arch).
func DebArch(name string) (debArch, triplet string, err error) {
	a, err := arch.Lookup(name)
	if err != nil {
		return "", "", err
	}
	return a.DebArch, a.Triplet, nil
}

// Package is one resolved Debian package.
type Package struct {
	Name      string `json:"name"` // without :arch
	Arch      string `json:"arch"`
	Version   string `json:"version"`
	SHA256    string `json:"sha256"`
	Filename  string `json:"filename"` // pool path, for the record
	MultiArch string `json:"multi_arch,omitempty"`
}

// Userland is a built archive.
type Userland struct {
	Arch     string            `json:"arch"` // Debian architecture
	Archive  string            `json:"archive"`
	Key      string            `json:"key"`
	Tools    map[string]string `json:"tools"`    // tool -> path in the guest
	Versions map[string]string `json:"versions"` // tool -> package version
	Packages []Package         `json:"packages"`
	Files    []string          `json:"files"` // guest paths in the archive
	Bytes    int64             `json:"bytes"`
	Cached   bool              `json:"cached"` // the archive was already there
}

// LibPath is the LD_LIBRARY_PATH the guest uses with the archive's tools.
func (u *Userland) LibPath() string {
	seen := map[string]bool{}
	var dirs []string
	for _, f := range u.Files {
		if strings.Contains(path.Base(f), ".so") {
			d := path.Dir(f)
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	sort.Strings(dirs)
	return strings.Join(dirs, ":")
}

// formatVersion changes when the archive layout changes.
const formatVersion = "userland/1"

// Build returns the archive with tools for arch, building it when the
// cache does not hold it (cacheDir "" is the XDG cache directory, as for
// builds and agents). log receives progress lines (may be nil).
func Build(ctx context.Context, arch string, tools []string, cacheDir string, log io.Writer) (*Userland, error) {
	if cacheDir == "" {
		cacheDir = xdg.CacheDir()
	}
	if log == nil {
		log = io.Discard
	}
	debArch, triplet, err := DebArch(arch)
	if err != nil {
		return nil, err
	}
	tools, roots, err := toolPackages(tools)
	if err != nil {
		return nil, err
	}
	if err := needDpkgAndApt(); err != nil {
		return nil, err
	}
	ap := aptFor(debArch, cacheDir, log)
	if err := ap.checkArch(ctx, debArch); err != nil {
		return nil, err
	}
	dir := filepath.Join(cacheDir, "userland")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fail.Infra(err)
	}
	pkgs, err := resolveCached(ctx, ap, dir, debArch, roots)
	if err != nil {
		return nil, err
	}
	key := archiveKey(debArch, tools, pkgs)
	base := filepath.Join(dir, debArch+"-"+key)
	if u := cachedUserland(base); u != nil {
		return u, nil
	}
	fmt.Fprintf(log, "userland: %s for %s: %d packages\n", strings.Join(tools, ", "), debArch, len(pkgs))
	debs, err := ap.download(ctx, filepath.Join(dir, "debs"), pkgs, log)
	if err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp(dir, "stage-")
	if err != nil {
		return nil, fail.Infra(err)
	}
	defer os.RemoveAll(stage)
	if err := unpackDebs(ctx, debs, stage); err != nil {
		return nil, err
	}
	u, want := newUserland(debArch, key, tools, pkgs)
	files, err := closure(stage, triplet, want)
	if err != nil {
		return nil, err
	}
	if err := u.writeArchive(base+".cpio", files); err != nil {
		return nil, err
	}
	if err := u.writeIndex(base + ".json"); err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "userland: %s: %d files, %d KiB\n", u.Archive, len(u.Files), u.Bytes>>10)
	return u, nil
}

// toolPackages is tools sorted, with the Debian package of each; an
// unknown tool, or none, is an Input error.
func toolPackages(tools []string) (sorted, roots []string, err error) {
	if len(tools) == 0 {
		return nil, nil, fail.Inputf("userland: no tools asked for")
	}
	tools = append([]string(nil), tools...)
	sort.Strings(tools)
	for _, t := range tools {
		tl, ok := Tools[t]
		if !ok {
			return nil, nil, fail.Inputf("userland: unknown tool %q (known: stress-ng, perf; for a lab host: sshd, kexec, busybox)", t)
		}
		roots = append(roots, tl.Package)
	}
	return tools, roots, nil
}

// needDpkgAndApt checks that the Debian tools the packages come from are
// installed.
func needDpkgAndApt() error {
	for _, c := range []string{"apt-cache", "apt-get", "dpkg-deb", "dpkg"} {
		if _, err := exec.LookPath(c); err != nil {
			return fail.Infraf("userland: %s not found: the guest's tools come from Debian packages (run on Debian/Ubuntu with apt): %w", c, err)
		}
	}
	return nil
}

// archiveKey names the archive of tools from pkgs for debArch.
func archiveKey(debArch string, tools []string, pkgs []Package) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", formatVersion, debArch, strings.Join(tools, ","))
	for _, p := range pkgs {
		fmt.Fprintf(h, "%s %s %s %s\n", p.Name, p.Arch, p.Version, p.SHA256)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// cachedUserland is the Userland recorded at base+".json" whose archive
// is there, or nil.
func cachedUserland(base string) *Userland {
	if b, err := os.ReadFile(base + ".json"); err == nil {
		var u Userland
		if json.Unmarshal(b, &u) == nil {
			if _, err := os.Stat(u.Archive); err == nil {
				u.Cached = true
				return &u
			}
		}
	}
	return nil
}

// unpackDebs unpacks the packages into stage.
func unpackDebs(ctx context.Context, debs []string, stage string) error {
	for _, d := range debs {
		if out, err := exec.CommandContext(ctx, "dpkg-deb", "-x", d, stage).CombinedOutput(); err != nil {
			return fail.Infraf("userland: dpkg-deb -x %s: %v\n%s", d, err, out)
		}
	}
	return nil
}

// newUserland is the Userland of tools (their guest paths and package
// versions), with the guest paths it wants.
func newUserland(debArch, key string, tools []string, pkgs []Package) (*Userland, []string) {
	u := &Userland{Arch: debArch, Key: key, Tools: map[string]string{}, Versions: map[string]string{}, Packages: pkgs}
	var want []string
	for _, t := range tools {
		tl := Tools[t]
		u.Tools[t] = tl.Path
		for _, p := range pkgs {
			if p.Name == tl.Package {
				u.Versions[t] = p.Version
			}
		}
		want = append(want, tl.Path)
	}
	return u, want
}

// writeArchive writes files (guest path -> host path) as the cpio
// archive (through a temporary file, renamed), with the directories the
// tools expect, and records it, its files and their size in u.
func (u *Userland) writeArchive(archive string, files map[string]string) error {
	tmp := archive + fmt.Sprintf(".tmp%d", os.Getpid())
	f, err := os.Create(tmp)
	if err != nil {
		return fail.Infra(err)
	}
	cw := initramfs.NewWriter(f)
	guestPaths := make([]string, 0, len(files))
	for g := range files {
		guestPaths = append(guestPaths, g)
	}
	sort.Strings(guestPaths)
	for _, g := range guestPaths {
		data, err := os.ReadFile(files[g])
		if err != nil {
			f.Close()
			os.Remove(tmp)
			return fail.Infra(err)
		}
		u.Bytes += int64(len(data))
		if err := cw.File(strings.TrimPrefix(g, "/"), 0o755, data); err != nil {
			f.Close()
			os.Remove(tmp)
			return fail.Infra(err)
		}
	}
	// Directories the tools expect: stress-ng's temporary files, shm_open.
	cw.Dir("dev/shm")
	cw.Dir("tmp")
	err = cw.Close()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return fail.Infra(err)
	}
	if err := os.Rename(tmp, archive); err != nil {
		return fail.Infra(err)
	}
	u.Archive = archive
	u.Files = guestPaths
	return nil
}

// writeIndex records u as JSON at file (through a temporary file,
// renamed), for the next Build to find.
func (u *Userland) writeIndex(file string) error {
	b, _ := json.MarshalIndent(u, "", "  ")
	if err := os.WriteFile(file+".tmp", b, 0o644); err != nil {
		return fail.Infra(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		return fail.Infra(err)
	}
	return nil
}

// resolveCached is Resolve, remembered while apt's package lists stay
// the same (their names, sizes and times): apt-cache takes seconds.
func resolveCached(ctx context.Context, ap *aptState, dir, debArch string, roots []string) ([]Package, error) {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", formatVersion, debArch, strings.Join(roots, ","))
	lists, _ := filepath.Glob(filepath.Join(ap.listsDir(), "*Packages*"))
	for _, l := range lists {
		if fi, err := os.Stat(l); err == nil {
			fmt.Fprintf(h, "%s %d %d\n", l, fi.Size(), fi.ModTime().UnixNano())
		}
	}
	file := filepath.Join(dir, "resolved-"+hex.EncodeToString(h.Sum(nil))[:16]+".json")
	var pkgs []Package
	if len(lists) > 0 {
		if b, err := os.ReadFile(file); err == nil && json.Unmarshal(b, &pkgs) == nil && len(pkgs) > 0 {
			return pkgs, nil
		}
	}
	pkgs, err := ap.resolve(ctx, debArch, roots)
	if err != nil {
		return nil, err
	}
	if len(lists) > 0 {
		b, _ := json.Marshal(pkgs)
		if os.WriteFile(file+".tmp", b, 0o644) == nil {
			os.Rename(file+".tmp", file)
		}
	}
	return pkgs, nil
}

// Fetch downloads the candidate version of one Debian package for arch
// (a kernel image to boot, for example) into the cache, verified against
// apt's lists, and returns the .deb's path; a cached copy is reused.
func Fetch(ctx context.Context, arch, pkg, cacheDir string) (string, error) {
	if cacheDir == "" {
		cacheDir = xdg.CacheDir()
	}
	debArch, _, err := DebArch(arch)
	if err != nil {
		return "", err
	}
	ap := aptFor(debArch, cacheDir, nil)
	if err := ap.checkArch(ctx, debArch); err != nil {
		return "", err
	}
	infos, err := ap.show(ctx, []string{pkg + ":" + debArch})
	if err != nil {
		return "", err
	}
	p, ok := infos[pkg]
	if !ok {
		return "", fail.Infraf("userland: package %s:%s not in apt's lists", pkg, debArch)
	}
	paths, err := ap.download(ctx, filepath.Join(cacheDir, "userland", "debs"), []Package{p}, io.Discard)
	if err != nil {
		return "", err
	}
	return paths[0], nil
}

// checkArch makes sure apt knows debArch (native or foreign); a private
// state knows its own.
func (ap *aptState) checkArch(ctx context.Context, debArch string) error {
	if ap.private != nil {
		return nil
	}
	native, err := exec.CommandContext(ctx, "dpkg", "--print-architecture").Output()
	if err != nil {
		return fail.Infraf("userland: dpkg --print-architecture: %w", err)
	}
	if strings.TrimSpace(string(native)) == debArch {
		return nil
	}
	foreign, err := exec.CommandContext(ctx, "dpkg", "--print-foreign-architectures").Output()
	if err != nil {
		return fail.Infraf("userland: dpkg --print-foreign-architectures: %w", err)
	}
	for _, a := range strings.Fields(string(foreign)) {
		if a == debArch {
			return nil
		}
	}
	return fail.Infraf("userland: apt does not know the architecture %s; as root run .ci/install-deps "+
		"(or: dpkg --add-architecture %s && apt-get update)", debArch, debArch)
}

// Resolve returns the root packages and every package they depend on
// (Depends, Pre-Depends; the first alternative of a group) that may ship
// shared libraries for debArch: built for it and not Multi-Arch
// foreign/allowed. Interpreters, programs and data (perl, python3, dpkg,
// tar) are what the tools' scripts use, never what their ELF binaries
// load. Sorted by name.
func Resolve(ctx context.Context, debArch string, roots []string) ([]Package, error) {
	return aptFor(debArch, "", nil).resolve(ctx, debArch, roots)
}

func (ap *aptState) resolve(ctx context.Context, debArch string, roots []string) ([]Package, error) {
	native, _ := exec.CommandContext(ctx, "dpkg", "--print-architecture").Output()
	foreign := strings.TrimSpace(string(native)) != debArch && ap.private == nil
	qual := func(n string) string { return n + ":" + debArch }
	var names []string
	for _, r := range roots {
		names = append(names, qual(r))
	}
	// One recursive apt-cache call and one show: each apt-cache run loads
	// the whole package cache (seconds on a busy machine).
	args := append([]string{"depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
		"--no-breaks", "--no-replaces", "--no-enhances"}, names...)
	out, err := ap.run(ctx, "", "apt-cache", args...)
	if err != nil {
		return nil, fail.Infraf("userland: apt-cache depends %s: %w (apt-get update after dpkg --add-architecture %s?)", strings.Join(names, " "), err, debArch)
	}
	graph := ParseDepends(out, debArch, foreign)
	var all []string
	for n := range graph {
		all = append(all, qual(n))
	}
	sort.Strings(all)
	infos, err := ap.show(ctx, all)
	if err != nil {
		return nil, err
	}
	got := map[string]Package{}
	queue := append([]string(nil), roots...)
	isRoot := map[string]bool{}
	for _, r := range roots {
		isRoot[r] = true
	}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		if _, done := got[n]; done {
			continue
		}
		p, ok := infos[n]
		if !ok {
			if isRoot[n] {
				return nil, fail.Infraf("userland: package %s not in apt's lists (apt-get update after dpkg --add-architecture %s?)", qual(n), debArch)
			}
			continue
		}
		if !isRoot[n] && !sharedLib(p) {
			continue
		}
		got[n] = p
		queue = append(queue, graph[n]...)
	}
	res := make([]Package, 0, len(got))
	for _, p := range got {
		res = append(res, p)
	}
	sort.Slice(res, func(i, j int) bool { return res[i].Name < res[j].Name })
	return res, nil
}

// sharedLib says whether p may hold shared libraries an ELF program of
// its architecture loads.
func sharedLib(p Package) bool {
	return p.Arch != "all" && p.MultiArch != "foreign" && p.MultiArch != "allowed"
}

// show runs apt-cache show --no-all-versions on names (pkg:arch) and
// returns the candidate versions by bare name.
func (ap *aptState) show(ctx context.Context, names []string) (map[string]Package, error) {
	args := append([]string{"show", "--no-all-versions"}, names...)
	out, err := ap.run(ctx, "", "apt-cache", args...)
	if err != nil && len(out) == 0 {
		// apt-cache fails when one name is unknown; ask one at a time.
		res := map[string]Package{}
		if len(names) == 1 {
			return res, nil
		}
		for _, n := range names {
			r, err := ap.show(ctx, []string{n})
			if err != nil {
				return nil, err
			}
			for k, v := range r {
				res[k] = v
			}
		}
		return res, nil
	}
	return ParseShow(out), nil
}

// ParseShow parses apt-cache show's stanzas (Debian's Packages format,
// internal/debian.ParsePackages); the first stanza of a name wins.
func ParseShow(b []byte) map[string]Package {
	res := map[string]Package{}
	for _, p := range debian.ParsePackages(b) {
		if _, dup := res[p.Name]; !dup {
			res[p.Name] = Package{Name: p.Name, Arch: p.Arch, Version: p.Version, SHA256: p.SHA256, Filename: p.Filename, MultiArch: p.MultiArch}
		}
	}
	return res
}

// ParseDepends parses `apt-cache depends [--recurse]` output into
// package -> what it depends on, both as bare names and only for
// debArch: the first alternative of each group, virtual packages through
// their provider of debArch; ":any" dependencies (interpreters) are left
// out. When foreign, debArch's names carry ":debArch" and others are
// dropped; otherwise names without an architecture are debArch's.
func ParseDepends(b []byte, debArch string, foreign bool) map[string][]string {
	res := map[string][]string{}
	bareOf := func(name string) (string, bool) {
		if strings.HasSuffix(name, ":any") {
			return "", false
		}
		bare, arch, hasArch := strings.Cut(name, ":")
		if foreign && (!hasArch || arch != debArch) {
			return "", false
		}
		if !foreign && hasArch && arch != debArch {
			return "", false
		}
		return bare, true
	}
	cur := ""        // the package whose dependencies follow ("" = not debArch's)
	inAlt := false   // the previous dependency line started an alternative group
	virtual := false // waiting for the provider of a virtual package
	pick := func(name string) bool {
		bare, ok := bareOf(name)
		if ok && cur != "" {
			res[cur] = append(res[cur], bare)
		}
		return ok
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, " ") {
			inAlt, virtual = false, false
			cur = ""
			if !strings.HasPrefix(line, "<") {
				if bare, ok := bareOf(strings.TrimSpace(line)); ok {
					cur = bare
					if _, seen := res[cur]; !seen {
						res[cur] = nil
					}
				}
			}
			continue
		}
		if strings.HasPrefix(line, "    ") { // provider of a virtual package
			if virtual && pick(strings.TrimSpace(line)) {
				virtual = false
			}
			continue
		}
		t := strings.TrimSpace(line)
		alt := strings.HasPrefix(t, "|")
		t = strings.TrimPrefix(t, "|")
		k, v, ok := strings.Cut(t, ": ")
		if !ok || (k != "Depends" && k != "PreDepends") {
			continue
		}
		skip := inAlt // an earlier alternative of this group was taken
		inAlt = alt
		virtual = false
		if skip {
			continue
		}
		if strings.HasPrefix(v, "<") {
			virtual = !strings.HasSuffix(v, ":any>")
			continue
		}
		pick(v)
	}
	return res
}

// download fetches the packages into debDir (kept across builds: a deb
// whose SHA256 matches is not fetched again) and returns their paths in
// the order of pkgs.
func (ap *aptState) download(ctx context.Context, debDir string, pkgs []Package, log io.Writer) ([]string, error) {
	if err := os.MkdirAll(debDir, 0o755); err != nil {
		return nil, fail.Infra(err)
	}
	paths := make([]string, len(pkgs))
	var missing []int
	for i, p := range pkgs {
		paths[i] = filepath.Join(debDir, p.SHA256[:16]+"-"+path.Base(p.Filename))
		if sum, err := digest.File(paths[i]); err != nil || sum != p.SHA256 {
			missing = append(missing, i)
		}
	}
	if len(missing) == 0 {
		return paths, nil
	}
	tmp, err := os.MkdirTemp(debDir, "dl-")
	if err != nil {
		return nil, fail.Infra(err)
	}
	defer os.RemoveAll(tmp)
	args := []string{"download", "-q"}
	for _, i := range missing {
		args = append(args, pkgs[i].Name+":"+pkgs[i].Arch+"="+pkgs[i].Version)
	}
	fmt.Fprintf(log, "userland: apt-get download %d packages\n", len(missing))
	if out, err := ap.run(ctx, tmp, "apt-get", args...); err != nil {
		return nil, fail.Infraf("userland: apt-get download: %v\n%s", err, out)
	}
	for _, i := range missing {
		p := pkgs[i]
		src := filepath.Join(tmp, path.Base(p.Filename))
		sum, err := digest.File(src)
		if err != nil {
			// apt names the file from the version with ':' escaped as %3a.
			matches, _ := filepath.Glob(filepath.Join(tmp, p.Name+"_*_"+p.Arch+".deb"))
			if len(matches) != 1 {
				return nil, fail.Infraf("userland: apt-get download left no %s", path.Base(p.Filename))
			}
			src = matches[0]
			if sum, err = digest.File(src); err != nil {
				return nil, fail.Infra(err)
			}
		}
		if sum != p.SHA256 {
			return nil, fail.Infraf("userland: %s: SHA256 %s, apt's lists say %s", src, sum, p.SHA256)
		}
		if err := os.Rename(src, paths[i]); err != nil {
			return nil, fail.Infra(err)
		}
	}
	return paths, nil
}

// closure returns guest path -> staged file for the wanted programs and
// every shared object they load, found like the dynamic loader finds
// them (RUNPATH, then the multiarch and plain library directories).
func closure(stage, triplet string, want []string) (map[string]string, error) {
	files := map[string]string{}
	libDirs := []string{"/lib/" + triplet, "/usr/lib/" + triplet, "/lib", "/usr/lib", "/lib64", "/usr/lib64"}
	queue := append([]string(nil), want...)
	for len(queue) > 0 {
		g := queue[0]
		queue = queue[1:]
		if _, done := files[g]; done {
			continue
		}
		real, err := resolve(stage, g)
		if err != nil {
			return nil, fail.Infraf("userland: %s: %w", g, err)
		}
		files[g] = real
		ef, err := elf.Open(real)
		if err != nil {
			continue // a script or data file: nothing to load
		}
		var interp string
		for _, p := range ef.Progs {
			if p.Type == elf.PT_INTERP {
				b := make([]byte, p.Filesz)
				if _, err := p.ReadAt(b, 0); err == nil {
					interp = strings.TrimRight(string(b), "\x00")
				}
			}
		}
		needed, _ := ef.ImportedLibraries()
		runpath, _ := ef.DynString(elf.DT_RUNPATH)
		rpath, _ := ef.DynString(elf.DT_RPATH)
		ef.Close()
		if interp != "" {
			queue = append(queue, interp)
		}
		var dirs []string
		for _, rp := range append(runpath, rpath...) {
			for _, d := range strings.Split(rp, ":") {
				dirs = append(dirs, strings.ReplaceAll(d, "$ORIGIN", path.Dir(g)))
			}
		}
		dirs = append(dirs, libDirs...)
		for _, lib := range needed {
			found := ""
			for _, d := range dirs {
				if _, err := resolve(stage, path.Join(d, lib)); err == nil {
					found = path.Join(d, lib)
					break
				}
			}
			if found == "" {
				return nil, fail.Infraf("userland: %s needs %s, which no resolved package ships (searched %s)", g, lib, strings.Join(dirs, " "))
			}
			queue = append(queue, found)
		}
	}
	return files, nil
}

// resolve follows symlinks of guest path g inside the staging root.
// mergedUsr are the top directories that are links into /usr on a
// merged-/usr system.
var mergedUsr = map[string]bool{"bin": true, "sbin": true, "lib": true, "lib32": true, "lib64": true, "libx32": true}

func resolve(stage, g string) (string, error) {
	cur := path.Clean("/" + g)
	for hops := 0; hops < 40; hops++ {
		// Resolve directory components first (e.g. /lib64 -> usr/lib64).
		parts := strings.Split(strings.TrimPrefix(cur, "/"), "/")
		p := "/"
		changed := false
		for i, part := range parts {
			next := path.Join(p, part)
			fi, err := os.Lstat(filepath.Join(stage, next))
			if err != nil && i == 0 && mergedUsr[part] && os.IsNotExist(err) {
				// A merged-/usr suite (trixie): /lib -> usr/lib is base-files',
				// which the staged packages do not include.
				cur = path.Join(append([]string{"/usr", part}, parts[1:]...)...)
				changed = true
				break
			}
			if err != nil {
				return "", err
			}
			if fi.Mode()&os.ModeSymlink != 0 {
				target, err := os.Readlink(filepath.Join(stage, next))
				if err != nil {
					return "", err
				}
				if !path.IsAbs(target) {
					target = path.Join(p, target)
				}
				cur = path.Join(append([]string{target}, parts[i+1:]...)...)
				changed = true
				break
			}
			p = next
		}
		if !changed {
			fi, err := os.Stat(filepath.Join(stage, cur))
			if err != nil {
				return "", err
			}
			if !fi.Mode().IsRegular() {
				return "", fmt.Errorf("%s is not a regular file", cur)
			}
			return filepath.Join(stage, cur), nil
		}
	}
	return "", fmt.Errorf("%s: too many symlinks", g)
}
