// Package series turns a mail Thread into a patch Series: versions, the
// chosen version with the reason, cover letter, patches in order, trailers
// with provenance, base information and missing parts. It also writes a
// git-am-ready mbox (WriteAM).
//
// The entry point is Resolve. Applying a series to a git tree lives in the
// sub-package series/apply.
package series

import (
	"time"

	"github.com/patcheval/patcheval/mbox"
)

// Subject is a parsed patch subject line.
type Subject struct {
	// Prefixes inside the brackets other than PATCH/version/counter, e.g.
	// "net-next", "6.1", "RFC", "RESEND".
	Prefixes []string `json:"prefixes,omitempty"`
	IsPatch  bool     `json:"is_patch"`
	IsReply  bool     `json:"is_reply"` // "Re:" in front
	RFC      bool     `json:"rfc,omitempty"`
	Resend   bool     `json:"resend,omitempty"`
	Version  int      `json:"version"` // 1 when absent
	Index    int      `json:"index"`   // 0 for a cover letter or a lone patch
	Total    int      `json:"total"`   // 1 for a lone patch
	// HasCounter is true when the subject carried "i/n" or "i of n" (a
	// lone "[PATCH] foo" has none).
	HasCounter bool `json:"has_counter,omitempty"`
	// HasVersion is true when the subject carried "vN" (Version is 1
	// otherwise).
	HasVersion bool   `json:"has_version,omitempty"`
	Title      string `json:"title"` // the subject without prefixes
}

// Trailer is one "Name: value" line with where it came from.
type Trailer struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	// Person is the parsed address for person trailers (Reviewed-by, ...).
	Person *mbox.Address `json:"person,omitempty"`
	// Provenance.
	MessageID string       `json:"message_id"` // message that carried it
	From      mbox.Address `json:"from"`       // that message's sender
	Version   int          `json:"version"`    // series version it was given on
	FromCover bool         `json:"from_cover,omitempty"`
	// InPatch is true for trailers already in the patch's own commit message.
	InPatch bool `json:"in_patch,omitempty"`
	// Normalized holds the value as written in the mail when Value had to
	// be cleaned up (an address polluted by an HTML mail client:
	// "Name <a@b.c<mailto:a@b.c>>" became "Name <a@b.c>").
	Normalized string `json:"normalized_from,omitempty"`
	// Problem says why a trailer cannot be used as it is (an address that
	// cannot be made valid); Resolve refuses such trailers with a note.
	Problem string `json:"problem,omitempty"`
}

// String renders "Name: value".
func (t Trailer) String() string { return t.Name + ": " + t.Value }

// Patch is one patch of a series.
type Patch struct {
	Msg *mbox.Message `json:"-"`
	// MessageID is Msg's Message-ID (for JSON).
	MessageID string  `json:"message_id"`
	Subject   Subject `json:"subject"`
	// Author and Date of the commit: the in-body From:/Date: win over the
	// mail headers.
	Author mbox.Address `json:"author"`
	Date   time.Time    `json:"date"`
	// Message is the commit message body (without the title line), ending
	// before "---"; Trailers collected from replies are NOT included.
	Message string `json:"-"`
	// Diff is the patch text from the first "diff --git" line (or "---"
	// "+++" pair) on, without the trailing signature.
	Diff string `json:"-"`
	// Broken says where the diff ends before its last hunk does (a mail
	// cut mid-hunk), naming the file and hunk; "" for a whole diff.
	Broken string `json:"broken,omitempty"`
	// Trailers collected from replies and the cover letter (with
	// provenance), in the order they were given; the patch's own trailers
	// are in Message and also listed here with InPatch set.
	Trailers []Trailer `json:"trailers,omitempty"`
	// FromVersion is the version this patch was taken from when a partial
	// re-roll was filled in from an earlier version (0: same version).
	FromVersion int `json:"from_version,omitempty"`
	// PatchID is `git patch-id --stable` of Diff.
	PatchID string `json:"patch_id,omitempty"`
	// BelowCut is the text between the "---" line and the diff (notes,
	// changelog, diffstat); git am drops it.
	BelowCut string `json:"-"`
}

// Base describes what the series applies to.
type Base struct {
	Commit        string   `json:"base_commit,omitempty"`
	Prerequisites []string `json:"prerequisite_patch_ids,omitempty"`
	ChangeID      string   `json:"change_id,omitempty"`
}

// Version summarises one version found in the thread.
type Version struct {
	Version   int       `json:"version"`
	Total     int       `json:"total"`
	Found     []int     `json:"found"`
	Date      time.Time `json:"date"`
	MessageID string    `json:"message_id"` // first message of this version
	Title     string    `json:"title"`
}

// Series is the resolved series for one version.
type Series struct {
	Title   string `json:"title"`
	Version int    `json:"version"`
	// Reason says why this version was chosen.
	Reason string        `json:"reason"`
	Author mbox.Address  `json:"author"`
	Date   time.Time     `json:"date"`
	Cover  *mbox.Message `json:"-"`
	// CoverMessageID is the cover letter's Message-ID ("" without one).
	CoverMessageID string   `json:"cover_message_id,omitempty"`
	Patches        []*Patch `json:"patches"`
	// Missing lists patch numbers (1-based) not found.
	Missing  []int     `json:"missing,omitempty"`
	Base     Base      `json:"base"`
	Versions []Version `json:"versions"`
	// Notes are human-readable remarks (partial re-roll filled in, trailers
	// refused because the sender did not match, ...).
	Notes []string `json:"notes,omitempty"`
	// Orphans are Message-IDs of thread messages whose parent is missing.
	Orphans []string `json:"orphans,omitempty"`
	// Refused trailers (sender mismatch etc.) with provenance.
	Refused []Trailer `json:"refused_trailers,omitempty"`
}

// First is the message that stands for the whole series: the cover letter,
// else the first patch; nil when there is neither. Replies, links and file
// names (Slug) name the series by it.
func (s *Series) First() *mbox.Message {
	if s == nil {
		return nil
	}
	if s.Cover != nil {
		return s.Cover
	}
	if len(s.Patches) > 0 && s.Patches[0] != nil {
		return s.Patches[0].Msg
	}
	return nil
}

// Options steer Resolve.
type Options struct {
	// Version picks a version (0: latest).
	Version int
	// AnySender accepts person trailers from any sender.
	AnySender bool
}
