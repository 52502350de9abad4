package watch

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/pipelines/store"
)

// configFile is the part of config.toml this package reads:
//
//	[[watch]]
//	name = "mainline-rc"            # default: from the remote and tags
//	remote = "https://git.kernel.org/pub/scm/linux/kernel/git/torvalds/linux.git"
//	branch = "master"               # optional
//	tags = "v6.*-rc*"
//	pipeline = "selinux-tax"
//	series = "<msgid>"              # optional: re-apply this series on each tag
//	schedule = "@every 30m"         # default
//	bisect = true                   # bisect regressions
//	tree = "/srv/linux.git"         # local tree tags are fetched into
type configFile struct {
	Watch []configWatch `toml:"watch"`
}

type configWatch struct {
	Name     string `toml:"name"`
	Remote   string `toml:"remote"`
	Branch   string `toml:"branch"`
	Tags     string `toml:"tags"`
	Pipeline string `toml:"pipeline"`
	Series   string `toml:"series"`
	Schedule string `toml:"schedule"`
	Bisect   bool   `toml:"bisect"`
	Tree     string `toml:"tree"`
	Regzbot  bool   `toml:"regzbot"`
}

// LoadConfig reads the [[watch]] tables of a config.toml (a missing file
// has none) and validates each; problems name the file, the table and
// the key. Other tables are left to their readers.
func LoadConfig(file string, pipelineOK func(string) error) ([]store.Watch, error) {
	var cfg configFile
	md, err := toml.DecodeFile(file, &cfg)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fail.Inputf("%s: %v", file, err)
	}
	var errs []string
	for _, k := range md.Undecoded() {
		if len(k) >= 2 && k[0] == "watch" {
			errs = append(errs, fmt.Sprintf("%s: [[watch]] has no key %q (keys: name remote branch tags pipeline series schedule bisect tree regzbot)", file, k[len(k)-1]))
		}
	}
	var out []store.Watch
	names := map[string]bool{}
	for i, c := range cfg.Watch {
		w := store.Watch{Name: c.Name, Remote: c.Remote, Branch: c.Branch, Tags: c.Tags, Pipeline: c.Pipeline,
			SeriesID: c.Series, Schedule: c.Schedule, Bisect: c.Bisect, Tree: c.Tree, Origin: "config",
			Regzbot: c.Regzbot}
		if w.Name == "" {
			w.Name = DefaultName(w.Remote, w.Tags)
		}
		if err := Validate(&w, pipelineOK); err != nil {
			errs = append(errs, fmt.Sprintf("%s: [[watch]] #%d: %v", file, i+1, err))
			continue
		}
		if names[w.Name] {
			errs = append(errs, fmt.Sprintf("%s: [[watch]] #%d: name %q used twice", file, i+1, w.Name))
			continue
		}
		names[w.Name] = true
		out = append(out, w)
	}
	if len(errs) > 0 {
		return nil, fail.Inputf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

// Sync stores config watches: new ones are added, changed ones updated.
// Watches added on the command line with the same name are left alone
// and reported.
func Sync(st *store.Store, ws []store.Watch) (added, updated []string, err error) {
	have, err := st.Watches()
	if err != nil {
		return nil, nil, err
	}
	byName := map[string]*store.Watch{}
	for _, w := range have {
		byName[w.Name] = w
	}
	for _, w := range ws {
		old := byName[w.Name]
		switch {
		case old == nil:
			if _, err := st.AddWatch(w); err != nil {
				return added, updated, err
			}
			added = append(added, w.Name)
		case old.Origin != "config":
			return added, updated, fail.Inputf("config watch %q: a watch of that name was added with 'watch add'; rename one", w.Name)
		case old.Remote != w.Remote || old.Branch != w.Branch || old.Tags != w.Tags || old.Pipeline != w.Pipeline ||
			old.SeriesID != w.SeriesID || old.Schedule != w.Schedule || old.Bisect != w.Bisect || old.Tree != w.Tree ||
			old.Regzbot != w.Regzbot:
			w.ID = old.ID
			if err := st.UpdateWatch(w); err != nil {
				return added, updated, err
			}
			updated = append(updated, w.Name)
		}
	}
	return added, updated, nil
}

var nonName = lazyre.New(`[^A-Za-z0-9._-]+`)

// DefaultName names a watch after its remote and tag pattern:
// "linux-v6.x-rc" for linux.git and v6.*-rc*.
func DefaultName(remote, tags string) string {
	base := strings.TrimSuffix(path.Base(strings.TrimRight(remote, "/")), ".git")
	t := strings.Trim(nonName.ReplaceAllString(strings.ReplaceAll(tags, "*", "x"), "_"), "_.-")
	n := strings.Trim(nonName.ReplaceAllString(base, "_"), "_.-")
	if n == "" {
		n = "watch"
	}
	if t != "" {
		n += "-" + t
	}
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}
