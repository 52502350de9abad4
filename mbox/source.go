package mbox

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// DefaultLore is the public-inbox base URL used when none is given.
const DefaultLore = "https://lore.kernel.org"

// LoreBase picks the lore base URL: flag when set, else $PATCHEVAL_LORE,
// else DefaultLore. A trailing slash is removed.
func LoreBase(flag string) string {
	b := flag
	if b == "" {
		b = os.Getenv("PATCHEVAL_LORE")
	}
	if b == "" {
		b = DefaultLore
	}
	return strings.TrimRight(b, "/")
}

// SplitLore reads a lore setting (--lore, $PATCHEVAL_LORE, serve's
// --lore): a server's base ("https://lore.kernel.org"), its "all" index
// (".../all"), a list (".../linuxppc-dev") or a message URL of either
// (".../linuxppc-dev/<msgid>/T/"). It returns the server's base and the
// list ("" for the base and the all index). Anything but an http(s) URL
// is a fail.Input error. A base with a path of its own (public-inbox
// mounted below "/lists") is given as ".../lists/all".
func SplitLore(lore string) (base, inbox string, err error) {
	u, perr := url.Parse(strings.TrimSpace(lore))
	if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fail.Inputf("lore %q: want an http(s) URL such as %s, %s/all or %s/linuxppc-dev", lore, DefaultLore, DefaultLore, DefaultLore)
	}
	if strings.Contains(u.Path, "@") {
		src, err := parseLoreURL(u.String())
		if err != nil {
			return "", "", err
		}
		return src.Base, src.Inbox, nil
	}
	base = u.Scheme + "://" + u.Host
	segs := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	if len(segs) == 1 && segs[0] == "" {
		return base, "", nil
	}
	last := segs[len(segs)-1]
	if len(segs) > 1 {
		base += "/" + strings.Join(segs[:len(segs)-1], "/")
	}
	if last == "all" {
		return base, "", nil
	}
	return base, last, nil
}

// LoreLink is the prefix of a link to a message on the lore a setting
// names (SplitLore's forms): "<base>/<list>/" for a list, "<base>/all/"
// for the server or its all index; a Message-ID and "/" complete it. A
// setting that is not an http(s) URL gives DefaultLore's.
func LoreLink(lore string) string {
	base, inbox, err := SplitLore(LoreBase(lore))
	if err != nil {
		base, inbox = DefaultLore, ""
	}
	if inbox == "" {
		inbox = "all"
	}
	return base + "/" + inbox + "/"
}

// OnLore reports whether the lore URL u (a message, list or index URL) is
// on the public-inbox server the setting lore names: the same scheme,
// host and base path, whatever list either names.
func OnLore(lore, u string) bool {
	want, _, err := SplitLore(LoreBase(lore))
	if err != nil {
		return false
	}
	got, _, err := SplitLore(u)
	return err == nil && got != "" && strings.EqualFold(got, want)
}

// SourceKind says where a thread comes from.
type SourceKind int

const (
	// SourceLore is a thread on a public-inbox server, found by Message-ID.
	SourceLore SourceKind = iota
	// SourceFile is an mbox file (mboxrd or mboxo, optionally gzipped) or
	// one raw message.
	SourceFile
	// SourceMaildir is a maildir directory.
	SourceMaildir
	// SourceStdin is an mbox (or one message) read from standard input.
	SourceStdin
)

func (k SourceKind) String() string {
	switch k {
	case SourceFile:
		return "file"
	case SourceMaildir:
		return "maildir"
	case SourceStdin:
		return "stdin"
	default:
		return "lore"
	}
}

// Source names a thread to fetch.
type Source struct {
	Kind SourceKind
	// MsgID is the Message-ID (no brackets) of any message in the thread
	// (SourceLore). For the local kinds it is optional and picks that
	// message's thread out of a mailbox holding several.
	MsgID string
	// Base is the public-inbox base URL taken from a lore URL argument
	// ("https://lore.kernel.org"); "" means FetchOptions.Lore.
	Base string
	// Inbox is the list name from a lore URL ("linuxppc-dev"); "" means
	// ask <base>/all/ first.
	Inbox string
	// Path is the mbox file or maildir (SourceFile, SourceMaildir).
	Path string
}

// String describes the source for messages.
func (s Source) String() string {
	switch s.Kind {
	case SourceLore:
		if s.Inbox != "" {
			return fmt.Sprintf("<%s> on %s/%s", s.MsgID, s.Base, s.Inbox)
		}
		if s.Base != "" {
			return fmt.Sprintf("<%s> on %s", s.MsgID, s.Base)
		}
		return "<" + s.MsgID + ">"
	case SourceStdin:
		return "stdin"
	default:
		return s.Path
	}
}

// ParseSource interprets a command-line argument naming a thread:
//
//   - "-": an mbox on standard input;
//   - a lore URL: https://lore.kernel.org/linuxppc-dev/<msgid>/ and its
//     variants (.../T/#u, .../t.mbox.gz, .../raw, /all/<msgid>/, /r/<msgid>,
//     https://patch.msgid.link/<msgid>), percent-escapes undone;
//   - a Message-ID with or without angle brackets (or an "id:" prefix);
//   - an existing file or directory (mbox or maildir), as given to -m.
//
// Anything else is a fail.Input error.
func ParseSource(arg string) (Source, error) {
	arg = strings.TrimSpace(arg)
	if arg == "" {
		return Source{}, fail.Inputf("no thread given: want a Message-ID, a lore URL, or -m FILE")
	}
	if arg == "-" {
		return Source{Kind: SourceStdin}, nil
	}
	if strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://") {
		return parseLoreURL(arg)
	}
	id := strings.TrimPrefix(strings.TrimPrefix(arg, "id:"), "mid:")
	id = strings.TrimSpace(trimID(id))
	looksID := strings.Contains(id, "@") && !strings.ContainsAny(id, " \t\n<>")
	if !looksID || strings.ContainsAny(arg, "/") {
		if fi, err := os.Stat(arg); err == nil {
			return FileSource(arg, fi.IsDir()), nil
		}
	}
	if !looksID {
		return Source{}, fail.Inputf("%q is not a Message-ID (no '@'), a lore URL or an existing file", arg)
	}
	return Source{Kind: SourceLore, MsgID: id}, nil
}

// FileSource is the Source for -m PATH: "-" is stdin, a directory a
// maildir, anything else an mbox file.
func FileSource(path string, isDir bool) Source {
	switch {
	case path == "-":
		return Source{Kind: SourceStdin}
	case isDir:
		return Source{Kind: SourceMaildir, Path: path}
	default:
		return Source{Kind: SourceFile, Path: path}
	}
}

// viewSuffixes are the per-message and per-thread endpoints public-inbox
// serves below /<inbox>/<msgid>/.
var viewSuffixes = map[string]bool{
	"": true, "T": true, "t": true, "raw": true, "t.mbox.gz": true, "t.atom": true,
	"#R": true, "f": true, "R": true,
}

func parseLoreURL(arg string) (Source, error) {
	u, err := url.Parse(arg)
	if err != nil || u.Host == "" {
		return Source{}, fail.Inputf("%q is not a valid lore URL: %v", arg, err)
	}
	u.Fragment = ""
	u.RawQuery = ""
	segs := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
	// The Message-ID is the last segment containing '@' (escaped or not).
	at := -1
	for i, s := range segs {
		us, err := url.PathUnescape(s)
		if err == nil && strings.Contains(us, "@") {
			at = i
		}
	}
	if at < 0 {
		return Source{}, fail.Inputf("lore URL %q has no Message-ID in its path", arg)
	}
	id, _ := url.PathUnescape(segs[at])
	id = trimID(id)
	src := Source{Kind: SourceLore, MsgID: id}
	host := strings.ToLower(u.Host)
	if host == "patch.msgid.link" || host == "msgid.link" {
		return src, nil // a redirector; use the configured lore
	}
	prefix := segs[:at]
	if len(prefix) > 0 {
		switch in := prefix[len(prefix)-1]; in {
		case "all", "r":
		default:
			src.Inbox = in
		}
		prefix = prefix[:len(prefix)-1]
	}
	base := u.Scheme + "://" + u.Host
	if len(prefix) > 0 {
		base += "/" + strings.Join(prefix, "/")
	}
	src.Base = base
	return src, nil
}
