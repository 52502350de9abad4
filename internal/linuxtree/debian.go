package linuxtree

import (
	"context"
	"fmt"
	"io"
	"os/exec"
	"runtime"
	"strings"

	"github.com/patcheval/patcheval/internal/debian"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
)

// NewApt is the private apt state the imports share under cacheDir
// (cacheDir/debian/apt-ARCH): every suite of debian.Suites, the host's
// architecture (linux-source packages are "all").
func NewApt(cacheDir string, log io.Writer) *debian.Apt {
	arch := map[string]string{"amd64": "amd64", "arm64": "arm64", "ppc64le": "ppc64el", "riscv64": "riscv64", "386": "i386", "s390x": "s390x"}[runtime.GOARCH]
	if arch == "" {
		arch = "amd64"
	}
	return debian.Shared(cacheDir, arch, log)
}

// DebsDir is where downloaded packages are kept under cacheDir.
func DebsDir(cacheDir string) string { return debian.DebsDir(cacheDir) }

// Request is a release asked for by version.
type Request struct {
	Series   string // 7.2: the package is linux-source-7.2
	Upstream string // 7.2.13 (empty: the newest of the series)
	Debian   string // 7.2.12-1~bpo13+1 (empty: the newest of Upstream)
}

var requestRE = lazyre.New(`^v?(([0-9]+)\.([0-9]+)((\.[0-9]+)?(~rc[0-9]+)?))(-[0-9A-Za-z.+~]+)?$`)

// ParseRequest reads "7.2" (the newest 7.2 Debian serves), "7.2.13" (that
// point release) or a Debian version "7.2.12-1~bpo13+1".
func ParseRequest(s string) (Request, error) {
	m := requestRE.FindStringSubmatch(strings.Replace(s, "-rc", "~rc", 1))
	if m == nil {
		return Request{}, fail.Inputf("unknown kernel version %q: want X.Y (the newest Debian release of X.Y), X.Y.Z (that point release) or a Debian version such as 7.2.12-1~bpo13+1", s)
	}
	r := Request{Series: m[2] + "." + m[3]}
	if m[4] != "" {
		r.Upstream = m[1]
	}
	if m[7] != "" {
		r.Debian = m[1] + m[7]
	}
	return r, nil
}

// Package is the Debian package name of the request.
func (r Request) Package() string { return "linux-source-" + r.Series }

// existing returns the release already imported that satisfies r without
// asking the mirror: the same Debian version, or the same point release
// from Debian.
func existing(rels []Release, r Request) (Release, bool) {
	for _, rel := range rels {
		if !strings.HasPrefix(rel.Origin, "debian "+r.Package()+" ") {
			continue
		}
		v := strings.TrimPrefix(rel.Origin, "debian "+r.Package()+" ")
		if (r.Debian != "" && v == r.Debian) || (r.Debian == "" && r.Upstream != "" && rel.Version == r.Upstream) {
			return rel, true
		}
	}
	return Release{}, false
}

// Resolve finds the package version Debian serves for r.
func Resolve(ctx context.Context, apt *debian.Apt, r Request) (debian.Package, error) {
	if r.Debian != "" {
		return apt.Find(ctx, r.Package(), r.Debian)
	}
	pkgs, err := apt.Versions(ctx, r.Package())
	if err != nil {
		return debian.Package{}, err
	}
	for _, p := range pkgs {
		if r.Upstream == "" || debian.Upstream(p.Version) == r.Upstream {
			return p, nil
		}
	}
	want := r.Upstream
	if len(pkgs) > 0 && r.Upstream != "" {
		// Lists may be a day old: a new point release may have come since.
		if err := apt.Update(ctx, true); err != nil {
			return debian.Package{}, err
		}
		if pkgs, err = apt.Versions(ctx, r.Package()); err != nil {
			return debian.Package{}, err
		}
		for _, p := range pkgs {
			if debian.Upstream(p.Version) == r.Upstream {
				return p, nil
			}
		}
	}
	return debian.Package{}, fail.Input(debian.NotServed(r.Package(), want, apt.Suites, pkgs))
}

// ImportDebian imports the release r asks for: nothing when it is in the
// repository already (no network then), else the package is resolved,
// downloaded into debs (kept: a later import reads it from there),
// verified and imported.
func (repo *Repo) ImportDebian(ctx context.Context, apt *debian.Apt, debs string, r Request) (Result, error) {
	unlock, err := repo.Lock(ctx)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	rels, err := repo.Releases(ctx)
	if err != nil {
		return Result{}, err
	}
	if rel, ok := existing(rels, r); ok {
		return Result{Release: rel}, nil
	}
	p, err := Resolve(ctx, apt, r)
	if err != nil {
		return Result{}, err
	}
	deb, err := apt.Download(ctx, p, debs)
	if err != nil {
		return Result{}, err
	}
	src, err := DebianSource(deb, p)
	if err != nil {
		return Result{}, err
	}
	return repo.Import(ctx, src)
}

// ImportDeb imports a linux-source .deb file already on disk, after
// checking it against the SHA256 the suites' index gives for its name and
// version (a damaged or foreign file is refused as bad input).
func (repo *Repo) ImportDeb(ctx context.Context, apt *debian.Apt, file string) (Result, error) {
	out, err := exec.CommandContext(ctx, "dpkg-deb", "--showformat=${Package} ${Version}", "-W", file).Output()
	f := strings.Fields(string(out))
	if err != nil || len(f) != 2 {
		return Result{}, fail.Inputf("%s: not a readable Debian package (corrupt or truncated)", file)
	}
	p, err := apt.Find(ctx, f[0], f[1])
	if err != nil {
		return Result{}, err
	}
	if err := debian.Verify(file, p); err != nil {
		return Result{}, fail.Input(err)
	}
	src, err := DebianSource(file, p)
	if err != nil {
		return Result{}, err
	}
	return repo.ImportSource(ctx, src)
}

// ImportSource imports src under the repository's lock.
func (repo *Repo) ImportSource(ctx context.Context, src *Source) (Result, error) {
	unlock, err := repo.Lock(ctx)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	return repo.Import(ctx, src)
}

// String is the request as typed back.
func (r Request) String() string {
	switch {
	case r.Debian != "":
		return r.Debian
	case r.Upstream != "":
		return r.Upstream
	}
	return fmt.Sprint(r.Series)
}
