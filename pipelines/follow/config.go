package follow

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/pipelines/recipients"
)

// List is one followed mailing list, from a [[list]] table of
// config.toml:
//
//	[[list]]
//	url = "https://lore.kernel.org/linuxppc-dev"  # public-inbox base URL + list
//	name = "linuxppc-dev"          # default: the URL's last path element
//	paths = ["arch/powerpc/**"]    # series touching any of these (default: all)
//	subject = "powerpc|ppc"        # regex on the series title (default: all)
//	allow = ["*@linux.ibm.com"]    # sender globs (default: everyone)
//	deny = ["bot@*"]               # sender globs never evaluated
//	rfc = false                    # evaluate [RFC] series too (default false)
//	pipeline = "ppc-preempt-dynamic"
//	tree = "/srv/linux.git"        # the tree series apply to
//	base = "tree"                  # "tree": the tree's HEAD; "series": the series' base-commit
//	since = "2026-11-01"           # first use: read messages from this date (default: now)
//	quiet = "2m"                   # wait this long after a series' last patch
//	incomplete_after = "6h"        # a series still missing patches then is "incomplete"
//	poll = "5m"                    # poll interval
//	address = "linuxppc-dev@lists.ozlabs.org"  # the list's posting address (default: the
//	                               # series' To/Cc address named like the list)
//	report = "regressions"         # who hears of what: "regressions" (default), "all", "off"
//	recipients = [{ match = "linuxppc-dev@*", report = "all" }, { match = "*@example.com", report = "off" }]
//	reviewers = false              # also address the R: entries of MAINTAINERS
//
// A bot's reply goes to the series' author, the list and the maintainers
// (M:) of the touched files in the tree's MAINTAINERS (pipelines/
// recipients), each only when its setting takes the result: the first
// matching recipients rule, else report.
type List struct {
	Name     string         `json:"name"`
	URL      string         `json:"url"`
	Paths    []string       `json:"paths,omitempty"`
	Subject  *regexp.Regexp `json:"-"`
	Allow    []string       `json:"allow,omitempty"`
	Deny     []string       `json:"deny,omitempty"`
	RFC      bool           `json:"rfc,omitempty"`
	Pipeline string         `json:"pipeline"`
	Tree     string         `json:"tree,omitempty"`
	Base     string         `json:"base"`
	Since    time.Time      `json:"since,omitzero"`
	Quiet    time.Duration  `json:"quiet"`
	// IncompleteAfter is how long after its first message a series with
	// missing patches is given up as incomplete.
	IncompleteAfter time.Duration `json:"incomplete_after"`
	Poll            time.Duration `json:"poll"`
	// Address, Report, Recipients and Reviewers address the replies
	// (Policy).
	Address    string            `json:"address,omitempty"`
	Report     recipients.Mode   `json:"report"`
	Recipients []recipients.Rule `json:"recipients,omitempty"`
	Reviewers  bool              `json:"reviewers,omitempty"`
}

// Policy is the reply addressing of a series posted to l; first is the
// series' first message (for the list's address when l has none).
func (l List) Policy(first *mbox.Message) *recipients.Policy {
	addr := l.Address
	if addr == "" {
		addr = recipients.ListAddress(l.Name, first)
	}
	return &recipients.Policy{List: addr, Default: l.Report, Rules: l.Recipients, Reviewers: l.Reviewers}
}

type configFile struct {
	List []configList `toml:"list"`
}

type configList struct {
	Name            string            `toml:"name"`
	URL             string            `toml:"url"`
	Paths           []string          `toml:"paths"`
	Subject         string            `toml:"subject"`
	Allow           []string          `toml:"allow"`
	Deny            []string          `toml:"deny"`
	RFC             bool              `toml:"rfc"`
	Pipeline        string            `toml:"pipeline"`
	Tree            string            `toml:"tree"`
	Base            string            `toml:"base"`
	Since           string            `toml:"since"`
	Quiet           string            `toml:"quiet"`
	IncompleteAfter string            `toml:"incomplete_after"`
	Poll            string            `toml:"poll"`
	Address         string            `toml:"address"`
	Report          string            `toml:"report"`
	Recipients      []recipients.Rule `toml:"recipients"`
	Reviewers       bool              `toml:"reviewers"`
}

const listKeys = "url name paths subject allow deny rfc pipeline tree base since quiet incomplete_after poll address report recipients reviewers"

// LoadConfig reads the [[list]] tables of config.toml (a missing file has
// none). pipelineOK validates a pipeline name. Problems name the file,
// the table and the key.
func LoadConfig(file string, pipelineOK func(string) error) ([]List, error) {
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
		if len(k) >= 2 && k[0] == "list" {
			errs = append(errs, fmt.Sprintf("%s: [[list]] has no key %q (keys: %s)", file, k[len(k)-1], listKeys))
		}
	}
	var out []List
	names := map[string]bool{}
	for i, c := range cfg.List {
		l, err := c.list(pipelineOK)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: [[list]] #%d: %v", file, i+1, err))
			continue
		}
		if names[l.Name] {
			errs = append(errs, fmt.Sprintf("%s: [[list]] #%d: name %q used twice", file, i+1, l.Name))
			continue
		}
		names[l.Name] = true
		out = append(out, l)
	}
	if len(errs) > 0 {
		return nil, fail.Inputf("%s", strings.Join(errs, "\n"))
	}
	return out, nil
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (c configList) list(pipelineOK func(string) error) (List, error) {
	l := List{Name: c.Name, URL: strings.TrimRight(c.URL, "/"), Paths: c.Paths, Allow: c.Allow, Deny: c.Deny,
		RFC: c.RFC, Pipeline: c.Pipeline, Tree: c.Tree, Base: c.Base,
		Address: c.Address, Recipients: c.Recipients, Reviewers: c.Reviewers}
	var err error
	if l.Report, err = recipients.ParseMode("report", c.Report); err != nil {
		return l, err
	}
	if err := (recipients.Policy{List: l.Address, Rules: l.Recipients}).Validate(); err != nil {
		return l, err
	}
	u, err := url.Parse(l.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return l, fmt.Errorf("url %q: want the list's public-inbox URL, e.g. https://lore.kernel.org/linuxppc-dev", c.URL)
	}
	if l.Name == "" {
		l.Name = path.Base(u.Path)
	}
	if !nameRe.MatchString(l.Name) {
		return l, fmt.Errorf("name %q: letters, digits, '.', '_' and '-' only", l.Name)
	}
	if l.Pipeline == "" {
		return l, fmt.Errorf("pipeline: missing (the pipeline new series are evaluated with)")
	}
	if pipelineOK != nil {
		if err := pipelineOK(l.Pipeline); err != nil {
			return l, fmt.Errorf("pipeline %q: %v", l.Pipeline, err)
		}
	}
	switch l.Base {
	case "":
		l.Base = "tree"
	case "tree", "series":
	default:
		return l, fmt.Errorf("base %q: want \"tree\" (the tree's HEAD) or \"series\" (the series' base-commit)", c.Base)
	}
	for _, g := range append(append(append([]string{}, c.Paths...), c.Allow...), c.Deny...) {
		if _, err := path.Match(strings.ReplaceAll(g, "**", "*"), ""); err != nil {
			return l, fmt.Errorf("glob %q: %v", g, err)
		}
	}
	if c.Subject != "" {
		if l.Subject, err = regexp.Compile(c.Subject); err != nil {
			return l, fmt.Errorf("subject %q: %v", c.Subject, err)
		}
	}
	if c.Since != "" {
		if l.Since, err = time.Parse("2006-01-02", c.Since); err != nil {
			if l.Since, err = time.Parse(time.RFC3339, c.Since); err != nil {
				return l, fmt.Errorf("since %q: want YYYY-MM-DD or RFC 3339", c.Since)
			}
		}
	}
	for _, d := range []struct {
		key, v string
		to     *time.Duration
		def    time.Duration
	}{{"quiet", c.Quiet, &l.Quiet, 2 * time.Minute}, {"incomplete_after", c.IncompleteAfter, &l.IncompleteAfter, 6 * time.Hour},
		{"poll", c.Poll, &l.Poll, 5 * time.Minute}} {
		*d.to = d.def
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v < 0 {
			return l, fmt.Errorf("%s %q: want a duration such as 2m or 6h", d.key, d.v)
		}
		*d.to = v
	}
	return l, nil
}

// matchPath matches a file path against a glob where "**" is any number
// of path elements and other elements follow path.Match.
func matchPath(glob, p string) bool {
	return matchParts(strings.Split(glob, "/"), strings.Split(p, "/"))
}

func matchParts(g, p []string) bool {
	for len(g) > 0 {
		if g[0] == "**" {
			for i := 0; i <= len(p); i++ {
				if matchParts(g[1:], p[i:]) {
					return true
				}
			}
			return false
		}
		if len(p) == 0 {
			return false
		}
		if ok, _ := path.Match(g[0], p[0]); !ok {
			return false
		}
		g, p = g[1:], p[1:]
	}
	return len(p) == 0
}

// matchSender matches an address against a glob, case ignored.
func matchSender(glob, email string) bool {
	ok, _ := path.Match(strings.ToLower(glob), strings.ToLower(email))
	return ok
}
