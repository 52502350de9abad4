package follow

import (
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/internal/lazyre"
	"github.com/patcheval/patcheval/internal/netguard"
	"github.com/patcheval/patcheval/internal/redact"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/series/recipients"
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
//	triage = ["*@ellerman.id.au"]  # may command by reply (#patcheval retest, ...) besides
//	                               # the series' author and the maintainers of its files
//	per_patch = false              # also measure a series of several patches after each patch
//	                               # (the pipeline must compare base vs the same kernel + series)
//	trust = "dkim"                 # whose #patcheval commands are believed (trust.go): "dkim"
//	                               # (default: a DKIM signature of the From: domain verifies),
//	                               # "arc" (or the list's ARC-Authentication-Results says so),
//	                               # "any" (From: as written)
//	arc_authserv_id = "lists.example.org"  # the list's authserv-id (trust = "arc")
//	git_hosts = ["git.kernel.org", "github.com", "gitlab.com"]  # hosts `#patcheval test <git URL>
//	                               # <branch>` may fetch from (globs; the default shown)
//	git_schemes = ["https", "http", "git"]  # its URL schemes (the default; never file, ssh, ext)
//	git_networks = []              # non-public addresses (CIDR) a git host may resolve to: by
//	                               # default loopback, private, link-local, CGNAT, multicast... are
//	                               # refused (internal/netguard)
//
// A bot's reply goes to the series' author, the list and the maintainers
// (M:) of the touched files in the tree's MAINTAINERS (pipelines/
// recipients), each only when its setting takes the result: the first
// matching recipients rule, else report.
//
//	[list.patchwork]               # post checks to Patchwork (REST API 1.2+)
//	url = "https://patchwork.ozlabs.org"
//	project = "linuxppc-dev"       # optional: the project's linkname
//	token_file = "/etc/patcheval/patchwork.token"
//
//	[list.github]                  # push the applied branch, set statuses, comment on its PR
//	repo = "owner/linux"
//	mirror = "https://github.com/owner/linux.git"   # where branches go (default: the repo's)
//	token_file = "/etc/patcheval/github.token"
//	# or, as a GitHub App (check runs too; installation tokens are made
//	# from the App's key and renewed before they expire):
//	# app_id = 123456              # the App's app ID or client ID
//	# installation_id = 7890123
//	# private_key_file = "/etc/patcheval/github-app.pem"
//	api_url = ""                   # GitHub Enterprise: the API base URL
//
//	[list.mail]                    # the reply draft, over the [smtp] settings
//	mode = "moderated"             # held on the dashboard until approved; "auto" sends at once
//	archive = ""                   # where sent replies show up (default: the list's url)
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
	// Triage are sender globs who may command by reply besides the
	// series' author and the maintainers of its files (triage.go).
	Triage []string `json:"triage,omitempty"`
	// Trust is how far a command's From: is believed (TrustDKIM, "":
	// the same; TrustARC; TrustAny) and ARCAuthServID the list's
	// authserv-id in ARC-Authentication-Results (trust.go).
	Trust         string `json:"trust,omitempty"`
	ARCAuthServID string `json:"arc_authserv_id,omitempty"`
	// PerPatch measures each series of more than one patch after every
	// patch too, once the whole series is reported (the service's
	// per-patch job, as lore --per-patch): the report and the reply name
	// the patch that moves each metric.
	PerPatch bool `json:"per_patch,omitempty"`
	// GitHosts, GitSchemes and GitNetworks bound the remotes of
	// `#patcheval test <git URL> <branch>` (GitPolicy; nil: the
	// defaults).
	GitHosts    []string       `json:"git_hosts,omitempty"`
	GitSchemes  []string       `json:"git_schemes,omitempty"`
	GitNetworks []netip.Prefix `json:"git_networks,omitempty"`
	// The reporters that post this list's results (nil: none).
	Patchwork *PatchworkConfig `json:"patchwork,omitempty"`
	GitHub    *GitHubConfig    `json:"github,omitempty"`
	Mail      *MailConfig      `json:"mail,omitempty"`
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

// DefaultGitHosts and DefaultGitSchemes are a list's git_hosts and
// git_schemes when it sets none: the public hosts kernel branches are
// posted from, over the schemes git fetches from them.
var (
	DefaultGitHosts   = []string{"git.kernel.org", "github.com", "gitlab.com"}
	DefaultGitSchemes = []string{"https", "http", "git"}
)

// gitSchemes are the schemes a git_schemes setting may name.
var gitSchemes = []string{"https", "http", "git"}

// GitPolicy is what `#patcheval test <git URL> <branch>` may reach for
// l: its git hosts, schemes and networks, or the defaults.
func (l List) GitPolicy() netguard.Policy {
	p := netguard.Policy{Hosts: l.GitHosts, Schemes: l.GitSchemes, Networks: l.GitNetworks}
	if p.Hosts == nil {
		p.Hosts = DefaultGitHosts
	}
	if p.Schemes == nil {
		p.Schemes = DefaultGitSchemes
	}
	return p
}

// PatchworkConfig is a [list.patchwork] table.
type PatchworkConfig struct {
	URL       string `toml:"url" json:"url"`
	Project   string `toml:"project" json:"project,omitempty"`
	TokenFile string `toml:"token_file" json:"token_file"`
}

// GitHubConfig is a [list.github] table: a plain token (TokenFile), or
// a GitHub App installation (AppID, InstallationID, PrivateKeyFile).
type GitHubConfig struct {
	Repo      string `toml:"repo" json:"repo"`
	Mirror    string `toml:"mirror" json:"mirror,omitempty"`
	TokenFile string `toml:"token_file" json:"token_file,omitempty"`
	// App says TokenFile holds an App installation token that something
	// else keeps fresh.
	App            bool   `toml:"app" json:"app,omitempty"`
	AppID          AppID  `toml:"app_id" json:"app_id,omitempty"`
	InstallationID int64  `toml:"installation_id" json:"installation_id,omitempty"`
	PrivateKeyFile string `toml:"private_key_file" json:"private_key_file,omitempty"`
	APIURL         string `toml:"api_url" json:"api_url,omitempty"`
}

// AppID is a GitHub App's client ID ("Iv23li...") or numeric app ID; TOML
// may give either as a string, the app ID as an integer.
type AppID string

// UnmarshalTOML implements toml.Unmarshaler.
func (a *AppID) UnmarshalTOML(v any) error {
	switch x := v.(type) {
	case int64:
		*a = AppID(strconv.FormatInt(x, 10))
	case string:
		*a = AppID(x)
	default:
		return fmt.Errorf("app_id: want the App's client ID or app ID, not %T", v)
	}
	return nil
}

// MailConfig is a [list.mail] table.
type MailConfig struct {
	Mode    string `toml:"mode" json:"mode"`
	Archive string `toml:"archive" json:"archive,omitempty"`
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
	Triage          []string          `toml:"triage"`
	PerPatch        bool              `toml:"per_patch"`
	Trust           string            `toml:"trust"`
	ARCAuthServID   string            `toml:"arc_authserv_id"`
	GitHosts        []string          `toml:"git_hosts"`
	GitSchemes      []string          `toml:"git_schemes"`
	GitNetworks     []string          `toml:"git_networks"`

	Patchwork *PatchworkConfig `toml:"patchwork"`
	GitHub    *GitHubConfig    `toml:"github"`
	Mail      *MailConfig      `toml:"mail"`
}

var tableKeys = map[string]string{
	"list":            "url name paths subject allow deny rfc pipeline tree base since quiet incomplete_after poll address report recipients reviewers triage trust arc_authserv_id per_patch git_hosts git_schemes git_networks, tables patchwork github mail",
	"list.patchwork":  "url project token_file",
	"list.github":     "repo mirror token_file app app_id installation_id private_key_file api_url",
	"list.mail":       "mode archive",
	"list.recipients": "match report",
}

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
			table := strings.Join(k[:len(k)-1], ".")
			if keys, ok := tableKeys[table]; ok {
				name := "[" + table + "]"
				switch table {
				case "list":
					name = "[[list]]"
				case "list.recipients":
					name = "[[list]] recipients"
				}
				errs = append(errs, fmt.Sprintf("%s: %s has no key %q (keys: %s)", file, name, k[len(k)-1], keys))
			} else {
				errs = append(errs, fmt.Sprintf("%s: [list] has no table %q (tables: patchwork github mail)", file, strings.Join(k[1:], ".")))
			}
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

var nameRe = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)

func (c configList) list(pipelineOK func(string) error) (List, error) {
	l := List{Name: c.Name, URL: strings.TrimRight(c.URL, "/"), Paths: c.Paths, Allow: c.Allow, Deny: c.Deny,
		RFC: c.RFC, Pipeline: c.Pipeline, Tree: c.Tree, Base: c.Base,
		Address: c.Address, Recipients: c.Recipients, Reviewers: c.Reviewers, Triage: c.Triage, PerPatch: c.PerPatch}
	var err error
	if l.Report, err = recipients.ParseMode("report", c.Report); err != nil {
		return l, err
	}
	if err := (recipients.Policy{List: l.Address, Rules: l.Recipients}).Validate(); err != nil {
		return l, err
	}
	u, err := url.Parse(l.URL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return l, fmt.Errorf("url %q: want the list's public-inbox URL, e.g. https://lore.kernel.org/linuxppc-dev", redact.URL(c.URL))
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
	for _, g := range append(append(append(append([]string{}, c.Paths...), c.Allow...), c.Deny...), c.Triage...) {
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
	switch c.Trust {
	case "", TrustDKIM, TrustAny:
	case TrustARC:
		if c.ARCAuthServID == "" {
			return l, fmt.Errorf("trust \"arc\": arc_authserv_id missing (the authserv-id the list writes in ARC-Authentication-Results)")
		}
	default:
		return l, fmt.Errorf("trust %q: want \"dkim\" (default), \"arc\" or \"any\"", c.Trust)
	}
	l.Trust, l.ARCAuthServID = c.Trust, c.ARCAuthServID
	if err := c.git(&l); err != nil {
		return l, err
	}
	if err := c.reporters(&l); err != nil {
		return l, err
	}
	return l, nil
}

// git checks the settings of #patcheval test <git URL> <branch>.
func (c configList) git(l *List) error {
	for _, h := range c.GitHosts {
		if _, err := path.Match(h, ""); err != nil || h == "" || strings.ContainsAny(h, "/:@ ") {
			return fmt.Errorf("git_hosts %q: want host names or globs (git.kernel.org, *.example.org)", h)
		}
	}
	for _, s := range c.GitSchemes {
		if !slices.Contains(gitSchemes, s) {
			return fmt.Errorf("git_schemes %q: want some of %s (file, ssh and ext are never fetched on a mail's word)", s, strings.Join(gitSchemes, ", "))
		}
	}
	nets, err := netguard.ParseNetworks(c.GitNetworks)
	if err != nil {
		return fmt.Errorf("git_networks: %v", err)
	}
	l.GitHosts, l.GitSchemes, l.GitNetworks = c.GitHosts, c.GitSchemes, nets
	return nil
}

func httpURL(v string) bool {
	u, err := url.Parse(v)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil
}

// reporters checks the reporter tables (the token files are read when
// the reporters are made: NewReporting).
func (c configList) reporters(l *List) error {
	if pw := c.Patchwork; pw != nil {
		if !httpURL(pw.URL) {
			return fmt.Errorf("[list.patchwork] url %q: want the instance's http(s) base URL, e.g. https://patchwork.ozlabs.org", redact.URL(pw.URL))
		}
		if pw.TokenFile == "" {
			return fmt.Errorf("[list.patchwork] token_file: missing (a file holding the API token: Patchwork's user profile page makes one)")
		}
		cp := *pw
		l.Patchwork = &cp
	}
	if gh := c.GitHub; gh != nil {
		owner, name, ok := strings.Cut(gh.Repo, "/")
		if !ok || !nameRe.MatchString(owner) || !nameRe.MatchString(name) {
			return fmt.Errorf("[list.github] repo %q: want owner/name", gh.Repo)
		}
		app := gh.AppID != "" || gh.InstallationID != 0 || gh.PrivateKeyFile != ""
		switch {
		case app && gh.TokenFile != "":
			return fmt.Errorf("[list.github] token_file and app_id/installation_id/private_key_file: give a token or a GitHub App, not both")
		case app && (gh.AppID == "" || gh.InstallationID <= 0 || gh.PrivateKeyFile == ""):
			return fmt.Errorf("[list.github] a GitHub App needs app_id, installation_id (positive) and private_key_file (got %q, %d, %q)",
				gh.AppID, gh.InstallationID, gh.PrivateKeyFile)
		case !app && gh.TokenFile == "":
			return fmt.Errorf("[list.github] token_file: missing (a file holding a token that may push and set statuses), " +
				"or app_id, installation_id and private_key_file for a GitHub App (check runs too)")
		}
		if gh.Mirror != "" && !httpURL(gh.Mirror) {
			return fmt.Errorf("[list.github] mirror %q: want the repository's https git URL, without credentials", gh.Mirror)
		}
		if gh.APIURL != "" && !httpURL(gh.APIURL) {
			return fmt.Errorf("[list.github] api_url %q: want an http(s) URL", gh.APIURL)
		}
		cp := *gh
		l.GitHub = &cp
	}
	if m := c.Mail; m != nil {
		switch m.Mode {
		case "":
			m.Mode = "moderated"
		case "moderated", "auto":
		default:
			return fmt.Errorf("[list.mail] mode %q: want \"moderated\" (held until approved on the dashboard) or \"auto\" (only for lists that asked for a bot)", m.Mode)
		}
		if m.Archive != "" && !httpURL(m.Archive) {
			return fmt.Errorf("[list.mail] archive %q: want the list's public-inbox URL", m.Archive)
		}
		cp := *m
		if cp.Archive == "" {
			cp.Archive = l.URL
		}
		l.Mail = &cp
	}
	return nil
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
