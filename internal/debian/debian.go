// Package debian fetches packages from Debian suites the system's apt
// sources do not list (trixie, trixie-backports, sid on a bookworm
// machine) without touching /etc/apt: an Apt is a private apt state (its
// own sources.list, lists and cache under one directory) on the machine's
// own Debian mirror, driven through apt-get and apt-cache with
// -o Dir::Etc::sourcelist=... so that apt still verifies the suites'
// Release signatures.
//
//	a := debian.Shared(cacheDir, "amd64", os.Stderr) // or &debian.Apt{Dir: ..., Suites: []string{"sid"}, Arch: "riscv64"}
//	pkgs, err := a.Versions(ctx, "linux-source-7.2")   // every version served, newest first
//	p, err := a.Find(ctx, "linux-source-7.2", "7.2.13-1")
//	deb, err := a.Download(ctx, p, debian.DebsDir(cacheDir)) // SHA256 checked against the index
//
// Errors carry internal/fail kinds: a package or version the suites do not
// serve and a damaged .deb are bad input, the mirror unreachable is
// infrastructure.
package debian

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/patcheval/patcheval/internal/digest"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/gittree"
	"github.com/patcheval/patcheval/internal/progress"
)

// Suites are the suites of the machine's mirror an Apt may name.
var Suites = []string{"bookworm", "trixie", "trixie-backports", "sid"}

// Keyring is the Debian archive keyring apt checks the suites' Release
// files with (debian-archive-keyring).
const Keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"

// DefaultMaxAge is how old an Apt's lists may get before a look-up
// refreshes them.
const DefaultMaxAge = 24 * time.Hour

// Package is one version of a binary package in a suite's index.
type Package struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Arch     string `json:"arch"`     // "all" or a Debian architecture
	Filename string `json:"filename"` // pool path on the mirror
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
	// MultiArch is the Multi-Arch field ("same", "foreign", "allowed";
	// empty when absent).
	MultiArch string `json:"multi_arch,omitempty"`
}

// Apt is a private apt state. The zero MaxAge means DefaultMaxAge, an
// empty Mirror means the machine's (Mirror()), a nil Log discards
// progress. Methods may run from several processes at once: each takes a
// lock file in Dir.
type Apt struct {
	Dir    string        // state directory, created on first use
	Suites []string      // e.g. {"sid", "trixie-backports"}; each one of Suites
	Arch   string        // Debian architecture of the indexes ("amd64")
	Mirror string        // archive URL, e.g. http://deb.debian.org/debian
	MaxAge time.Duration // lists older than this are refreshed before a look-up
	Log    io.Writer
}

// Shared is the private apt state patcheval's users share under
// cacheDir (cacheDir/debian/apt-ARCH): every suite of Suites, indexes of
// the Debian architecture arch. Sharing it fetches the lists once.
func Shared(cacheDir, arch string, log io.Writer) *Apt {
	return &Apt{Dir: filepath.Join(cacheDir, "debian", "apt-"+arch), Suites: Suites, Arch: arch, Log: log}
}

// DebsDir is where Shared's users keep downloaded packages under cacheDir.
func DebsDir(cacheDir string) string { return filepath.Join(cacheDir, "debian", "debs") }

func (a *Apt) logf(format string, args ...any) {
	if a.Log != nil {
		fmt.Fprintf(a.Log, "debian: "+format+"\n", args...)
	}
}

// options are the -o flags that make apt-get and apt-cache use a's state
// and nothing of the system's sources, lists, cache or dpkg status.
func (a *Apt) options() []string {
	return []string{
		"-o", "Dir::Etc::sourcelist=" + filepath.Join(a.Dir, "sources.list"),
		"-o", "Dir::Etc::sourceparts=/dev/null",
		"-o", "Dir::State::Lists=" + filepath.Join(a.Dir, "lists"),
		"-o", "Dir::Cache=" + filepath.Join(a.Dir, "cache"),
		// Keep apt's parsed cache (some images switch it off): without it
		// every apt-cache call parses all the suites' lists again (~15 s).
		"-o", "Dir::Cache::pkgcache=pkgcache.bin",
		"-o", "Dir::Cache::srcpkgcache=srcpkgcache.bin",
		"-o", "Dir::State::status=/dev/null",
		"-o", "APT::Architectures=" + a.Arch,
		"-o", "Acquire::Languages=none",
		"-o", "Acquire::Retries=0",
		"-o", "Acquire::IndexTargets::deb::DEP-11::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons-small::DefaultEnabled=false",
		"-o", "Acquire::IndexTargets::deb::DEP-11-icons-hidpi::DefaultEnabled=false",
		"-o", "Debug::NoLocking=1", // our own lock file serialises users of Dir
	}
}

// sourcesList is the sources.list of a's suites.
func (a *Apt) sourcesList(mirror string) string {
	opts := ""
	if _, err := os.Stat(Keyring); err == nil {
		opts = "[signed-by=" + Keyring + "] "
	}
	var b strings.Builder
	b.WriteString("# written by patcheval (internal/debian); not the system's sources\n")
	for _, s := range a.Suites {
		fmt.Fprintf(&b, "deb %s%s %s main\n", opts, mirror, s)
	}
	return b.String()
}

// prepare validates a, writes the sources list and reports whether it
// changed (the lists then have to be fetched again).
func (a *Apt) prepare() (changed bool, err error) {
	if a.Dir == "" || a.Arch == "" || len(a.Suites) == 0 {
		return false, fail.Inputf("debian: an Apt needs Dir, Arch and Suites")
	}
	for _, s := range a.Suites {
		if !known(s) {
			return false, fail.Inputf("debian: unknown suite %q (known: %s)", s, strings.Join(Suites, ", "))
		}
	}
	mirror := a.Mirror
	if mirror == "" {
		if mirror, err = Mirror(); err != nil {
			return false, err
		}
	}
	for _, d := range []string{"lists/partial", "cache/archives/partial"} {
		if err := os.MkdirAll(filepath.Join(a.Dir, d), 0o755); err != nil {
			return false, fail.Infra(err)
		}
	}
	want := a.sourcesList(mirror)
	p := filepath.Join(a.Dir, "sources.list")
	if old, err := os.ReadFile(p); err == nil && string(old) == want {
		return false, nil
	}
	if err := os.WriteFile(p+".tmp", []byte(want), 0o644); err != nil {
		return false, fail.Infra(err)
	}
	os.Remove(filepath.Join(a.Dir, "updated"))
	return true, fail.Infra(os.Rename(p+".tmp", p))
}

func known(suite string) bool {
	for _, s := range Suites {
		if s == suite {
			return true
		}
	}
	return false
}

func (a *Apt) lock(ctx context.Context) (func(), error) {
	unlock, err := gittree.LockFile(ctx, filepath.Join(a.Dir, "lock"), syscall.LOCK_EX, func() {
		a.logf("waiting for another user of %s", a.Dir)
	})
	if err != nil {
		return nil, fail.Infraf("debian: locking %s: %w", a.Dir, err)
	}
	return unlock, nil
}

// open prepares a's state and takes its lock: changed says the state was
// (re)made and its lists must be fetched.
func (a *Apt) open(ctx context.Context) (changed bool, unlock func(), err error) {
	if changed, err = a.prepare(); err != nil {
		return false, nil, err
	}
	if unlock, err = a.lock(ctx); err != nil {
		return false, nil, err
	}
	return changed, unlock, nil
}

// getOptions are options() for apt-get: as root, apt's sandbox user is
// root (a download directory may not be _apt's).
func (a *Apt) getOptions() []string {
	if os.Geteuid() == 0 {
		return append([]string{"-o", "APT::Sandbox::User=root"}, a.options()...)
	}
	return a.options()
}

// Update fetches the suites' indexes (apt-get update on the private
// state). Unless force, lists younger than MaxAge are kept.
func (a *Apt) Update(ctx context.Context, force bool) error {
	changed, unlock, err := a.open(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return a.update(ctx, force || changed)
}

func (a *Apt) update(ctx context.Context, force bool) error {
	stamp := filepath.Join(a.Dir, "updated")
	maxAge := a.MaxAge
	if maxAge == 0 {
		maxAge = DefaultMaxAge
	}
	if fi, err := os.Stat(stamp); err == nil && !force && time.Since(fi.ModTime()) < maxAge {
		return nil
	}
	a.logf("apt-get update (%s, %s)", strings.Join(a.Suites, " "), a.Arch)
	args := append(a.options(), "-q", "--error-on=any", "update")
	out, err := exec.CommandContext(ctx, "apt-get", args...).CombinedOutput()
	if err != nil {
		return fail.Infraf("debian: apt-get update of %s failed (network or mirror): %s", strings.Join(a.Suites, " "), lastLines(out, 3))
	}
	return fail.Infra(os.WriteFile(stamp, nil, 0o644))
}

// Run runs apt-cache or apt-get (tool) with args on a's state, in dir
// ("" for the current one), after fetching stale lists, and returns its
// standard output. For apt-get download as root, apt's sandbox user is
// root (the download directory may not be _apt's).
func (a *Apt) Run(ctx context.Context, dir, tool string, args ...string) ([]byte, error) {
	if tool != "apt-cache" && tool != "apt-get" {
		return nil, fail.Inputf("debian: Run runs apt-cache or apt-get, not %q", tool)
	}
	changed, unlock, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := a.update(ctx, changed); err != nil {
		return nil, err
	}
	opts := a.options()
	if tool == "apt-get" {
		opts = a.getOptions()
	}
	cmd := exec.CommandContext(ctx, tool, append(opts, args...)...)
	cmd.Dir = dir
	return cmd.Output()
}

// ListsDir is where a keeps the suites' package lists.
func (a *Apt) ListsDir() string { return filepath.Join(a.Dir, "lists") }

// Updated reports when a's lists were last fetched (zero when never).
func (a *Apt) Updated() time.Time {
	fi, err := os.Stat(filepath.Join(a.Dir, "updated"))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

// Versions lists every version of the package the suites serve, newest
// first (Debian version order), refreshing stale lists first; none is not
// an error. When the lists are stale and the mirror cannot be reached,
// the old lists are used (a warning on Log).
func (a *Apt) Versions(ctx context.Context, name string) ([]Package, error) {
	return a.versions(ctx, name, false)
}

func (a *Apt) versions(ctx context.Context, name string, force bool) ([]Package, error) {
	changed, unlock, err := a.open(ctx)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := a.update(ctx, force || changed); err != nil {
		if a.Updated().IsZero() || changed || ctx.Err() != nil {
			return nil, err
		}
		a.logf("warning: %v; using the lists of %s", err, a.Updated().UTC().Format(time.RFC3339))
	}
	args := append(a.options(), "show", name)
	cmd := exec.CommandContext(ctx, "apt-cache", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if strings.Contains(stderr.String(), "No packages found") || strings.Contains(stderr.String(), "Unable to locate") {
			return nil, nil
		}
		return nil, fail.Infraf("debian: apt-cache show %s: %v: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	pkgs := ParsePackages(out)
	var res []Package
	for _, p := range pkgs {
		if p.Name == name {
			res = append(res, p)
		}
	}
	sort.SliceStable(res, func(i, j int) bool { return CompareVersions(res[i].Version, res[j].Version) > 0 })
	return res, nil
}

// Find returns the package at exactly that Debian version. When the lists
// do not hold it they are fetched once more before it is refused (bad
// input, naming the versions that are served).
func (a *Apt) Find(ctx context.Context, name, version string) (Package, error) {
	for attempt := 0; attempt < 2; attempt++ {
		pkgs, err := a.versions(ctx, name, attempt == 1)
		if err != nil {
			return Package{}, err
		}
		for _, p := range pkgs {
			if p.Version == version {
				return p, nil
			}
		}
		if attempt == 1 || time.Since(a.Updated()) < time.Minute {
			return Package{}, fail.Input(NotServed(name, version, a.Suites, pkgs))
		}
	}
	panic("unreachable")
}

// NotServed is the one line that says a package version is not in the
// suites, listing the versions that are.
func NotServed(name, version string, suites []string, served []Package) error {
	what := name
	if version != "" {
		what += " " + version
	}
	if len(served) == 0 {
		return fmt.Errorf("Debian serves no %s in %s", name, strings.Join(suites, ", "))
	}
	var vs []string
	for _, p := range served {
		vs = append(vs, p.Version)
	}
	return fmt.Errorf("Debian does not serve %s in %s (it serves %s)", what, strings.Join(suites, ", "), strings.Join(vs, ", "))
}

// Download fetches p into dir (apt-get download on the private state)
// and returns the path of the .deb, whose SHA256 matches the index. A
// file already in dir with the right SHA256 is not fetched again; one
// with another is replaced. Long downloads print their progress on Log.
func (a *Apt) Download(ctx context.Context, p Package, dir string) (string, error) {
	if p.SHA256 == "" || p.Filename == "" {
		return "", fail.Inputf("debian: %s %s: no SHA256 or file name in the index", p.Name, p.Version)
	}
	final := filepath.Join(dir, p.SHA256[:16]+"-"+path.Base(p.Filename))
	if err := Verify(final, p); err == nil {
		return final, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		a.logf("%s: %v; fetching it again", final, err)
	}
	if _, err := a.prepare(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fail.Infra(err)
	}
	tmp, err := os.MkdirTemp(dir, "dl-")
	if err != nil {
		return "", fail.Infra(err)
	}
	defer os.RemoveAll(tmp)
	args := append(a.getOptions(), "-q", "download", p.Name+":"+p.Arch+"="+p.Version)
	a.logf("downloading %s %s (%d MB)", p.Name, p.Version, p.Size>>20)
	cmd := exec.CommandContext(ctx, "apt-get", args...)
	cmd.Dir = tmp
	stop := a.watchDownload(tmp, p)
	out, err := cmd.CombinedOutput()
	stop()
	if err != nil {
		return "", fail.Infraf("debian: apt-get download %s=%s failed (network or mirror): %s", p.Name, p.Version, lastLines(out, 2))
	}
	got, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(got) != 1 {
		return "", fail.Infraf("debian: apt-get download %s=%s left %d .deb files", p.Name, p.Version, len(got))
	}
	if err := Verify(got[0], p); err != nil {
		return "", fail.Infraf("debian: downloaded %s: %v", path.Base(p.Filename), err)
	}
	if err := os.Rename(got[0], final); err != nil {
		return "", fail.Infra(err)
	}
	return final, nil
}

// watchDownload prints the size of the file apt-get is writing in dir
// every 5 s until stop is called.
func (a *Apt) watchDownload(dir string, p Package) (stop func()) {
	if a.Log == nil || p.Size == 0 {
		return func() {}
	}
	return progress.Every(5*time.Second, func() {
		var n int64
		files, _ := filepath.Glob(filepath.Join(dir, "*"))
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				n += fi.Size()
			}
		}
		a.logf("downloading %s %s: %d/%d MB", p.Name, p.Version, n>>20, p.Size>>20)
	})
}

// Verify checks that the file at path is p: its size and SHA256 as the
// index gives them. A mismatch is bad input naming the file.
func Verify(file string, p Package) error {
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	if p.Size > 0 && fi.Size() != p.Size {
		return fail.Inputf("%s is %d bytes, the index of %s %s says %d (truncated or not that package)", file, fi.Size(), p.Name, p.Version, p.Size)
	}
	sum, err := digest.File(file)
	if err != nil {
		return fail.Infra(err)
	}
	if sum != p.SHA256 {
		return fail.Inputf("%s has SHA256 %s, the index of %s %s says %s (corrupt or not that package)", file, sum, p.Name, p.Version, p.SHA256)
	}
	return nil
}

// ParsePackages parses index stanzas (apt-cache show, Packages files):
// every stanza with a Package and a Version, in order.
func ParsePackages(b []byte) []Package {
	var res []Package
	var p Package
	flush := func() {
		if p.Name != "" && p.Version != "" {
			res = append(res, p)
		}
		p = Package{}
	}
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ": ")
		if !ok || strings.HasPrefix(line, " ") {
			continue
		}
		switch k {
		case "Package":
			p.Name = v
		case "Version":
			p.Version = v
		case "Architecture":
			p.Arch = v
		case "Filename":
			p.Filename = v
		case "SHA256":
			p.SHA256 = v
		case "Size":
			p.Size, _ = strconv.ParseInt(v, 10, 64)
		case "Multi-Arch":
			p.MultiArch = v
		}
	}
	flush()
	return res
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
