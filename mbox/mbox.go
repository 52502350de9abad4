// Package mbox fetches mail threads (lore / public-inbox, mbox files,
// maildirs, stdin) and parses them into a Thread: deduplicated messages with
// decoded headers and text bodies, linked into a reply tree.
//
// The entry point is Fetch; Parse and NewThread are the building blocks.
package mbox

import (
	"time"
)

// Address is a decoded mail address.
type Address struct {
	Name  string `json:"name,omitempty"`
	Email string `json:"email"`
}

// String renders "Name <email>" (or just the email).
func (a Address) String() string {
	if a.Name == "" {
		return a.Email
	}
	return a.Name + " <" + a.Email + ">"
}

// Attachment is a non-inline MIME part. Text attachments that carry a diff
// are also appended to Message.Body by the parser (like public-inbox and b4
// treat them), and kept here for reference.
type Attachment struct {
	Filename    string `json:"filename,omitempty"`
	ContentType string `json:"content_type"`
	Data        []byte `json:"-"`
}

// Message is one decoded mail.
type Message struct {
	// MessageID without angle brackets. A message without a Message-ID
	// header gets a synthetic one (NoMessageID set) so that it can be
	// keyed and linked; it must never reach output that others follow
	// (Link: trailers, Message-ID headers, lore links, In-Reply-To):
	// use PublicID for those.
	MessageID string `json:"message_id"`
	// NoMessageID is true when the mail had no (usable) Message-ID header
	// and MessageID is synthetic.
	NoMessageID bool `json:"no_message_id,omitempty"`
	// InReplyTo is the parent's Message-ID (without brackets), or "".
	InReplyTo string `json:"in_reply_to,omitempty"`
	// References in header order, without brackets.
	References []string `json:"references,omitempty"`
	// Subject decoded (RFC 2047), folded whitespace collapsed.
	Subject string    `json:"subject"`
	From    Address   `json:"from"`
	To      []Address `json:"to,omitempty"`
	Cc      []Address `json:"cc,omitempty"`
	Date    time.Time `json:"date"`
	// Body is the text/plain content decoded to UTF-8 with LF line ends.
	Body        string       `json:"-"`
	Attachments []Attachment `json:"attachments,omitempty"`
	// Header holds every header, decoded, keys in canonical MIME form.
	Header map[string][]string `json:"-"`
	// Raw is the message as found in the source (mboxrd unescaped, LF).
	Raw []byte `json:"-"`
	// Source names where it came from (file:offset, URL) for error messages.
	Source string `json:"source,omitempty"`
	// Notes record what the parser had to repair or guess for this message
	// (synthetic Message-ID, unparsable Date, undecodable part, ...).
	Notes []string `json:"notes,omitempty"`
}

// PublicID is the Message-ID others can follow, "" when the message had
// none (MessageID is then synthetic).
func (m *Message) PublicID() string {
	if m == nil || m.NoMessageID {
		return ""
	}
	return m.MessageID
}

// Ref names the message for people: "<id>", or, for a message without a
// Message-ID, "the message without Message-ID at SOURCE".
func (m *Message) Ref() string {
	if m == nil {
		return "(none)"
	}
	if m.NoMessageID {
		return "the message without Message-ID at " + m.Source
	}
	return "<" + m.MessageID + ">"
}

// Thread is a set of messages linked into a reply tree.
type Thread struct {
	// Messages in a stable order: by Date, then Message-ID.
	Messages []*Message
	// Roots are messages with no parent (the thread's start; usually one).
	Roots []*Message
	// Orphans are replies whose parent is not in the thread. They are also
	// in Roots (they start a sub-tree) and are kept, not dropped. (An orphan
	// that the subject rule re-attached, see NewThread, is listed here but
	// not in Roots.)
	Orphans []*Message
	// Duplicates counts messages dropped because their Message-ID was seen.
	Duplicates int
	// Source describes where the thread came from (URL, file).
	Source string
	// Notes say what NewThread (and Fetch) noticed: duplicates dropped,
	// links made by subject, missing parents, a cached copy used.
	Notes []string

	byID     map[string]*Message
	parent   map[string]string
	children map[string][]*Message
	// enter and exit number the messages depth-first (IsAncestor), by
	// their index in Messages (idx).
	idx         map[string]int32
	enter, exit []int32
}

// ByID returns the message with that Message-ID (brackets optional).
func (t *Thread) ByID(id string) *Message { return t.byID[trimID(id)] }

// Parent returns the message m replies to, or nil.
func (t *Thread) Parent(m *Message) *Message {
	if p, ok := t.parent[m.MessageID]; ok {
		return t.byID[p]
	}
	return nil
}

// Children returns the direct replies to m, by date.
func (t *Thread) Children(m *Message) []*Message { return t.children[m.MessageID] }

// Ancestors returns m's chain of parents, nearest first.
func (t *Thread) Ancestors(m *Message) []*Message {
	var out []*Message
	seen := map[string]bool{m.MessageID: true}
	for p := t.Parent(m); p != nil && !seen[p.MessageID]; p = t.Parent(p) {
		seen[p.MessageID] = true
		out = append(out, p)
	}
	return out
}

func trimID(id string) string {
	for len(id) > 0 && (id[0] == '<' || id[0] == ' ') {
		id = id[1:]
	}
	for len(id) > 0 && (id[len(id)-1] == '>' || id[len(id)-1] == ' ') {
		id = id[:len(id)-1]
	}
	return id
}
