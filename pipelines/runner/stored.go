package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync/atomic"
	"unicode/utf8"

	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
	"github.com/patcheval/patcheval/mbox/numbers"
	"github.com/patcheval/patcheval/series"
)

// The series is resolved once per evaluation: Submit parses the thread,
// resolves the series (series.Resolve) and stores the result beside the
// thread (store.SetResolvedSeriesTx); every later stage (Apply, Report,
// GraphOf, Load) reads that instead of resolving the thread again. An
// evaluation stored before the resolved series was (an older patcheval)
// has none: its stages resolve the thread as they always did.

// resolve is series.ResolveContext (a variable so that a test can count
// the resolutions of an evaluation: CountResolutions).
var resolve = series.ResolveContext

// CountResolutions counts every series resolution the runner makes
// (Resolve, Submit, Check, a stage of an evaluation stored without its
// series) from now until restore is called: for the tests of this
// package and of the entry points (lore --pipeline, the service, the
// follower, the watches) that check that an evaluation's series is
// resolved once. Not for use beside another test counting.
func CountResolutions() (count func() int, restore func()) {
	var n atomic.Int64
	orig := resolve
	resolve = func(ctx context.Context, t *mbox.Thread, o series.Options) (*series.Series, error) {
		n.Add(1)
		return orig(ctx, t, o)
	}
	return func() int { return int(n.Load()) }, func() { resolve = orig }
}

// resolvedSeries is a series as resolved from its thread, with the
// numbers the thread reports (numbers.Read, for the report): what
// resolveSeries returns and the store keeps.
type resolvedSeries struct {
	series *series.Series
	thread []numbers.Number
}

// resolveSeries parses in's thread and resolves its series.
func resolveSeries(ctx context.Context, in inputs) (*resolvedSeries, error) {
	src := threadSource(in.Options)
	msgs, err := mbox.ParseBytesContext(ctx, in.Mbox, src)
	if err != nil {
		return nil, err
	}
	t, err := mbox.NewThreadContext(ctx, msgs, src)
	if err != nil {
		return nil, err
	}
	// The numbers first: the thread as parsed, as the report read it
	// from the thread before the series was stored.
	thread := numbers.Read(t)
	s, err := resolve(ctx, t, series.Options{Version: in.Version, AnySender: in.AnySender})
	if err != nil {
		return nil, err
	}
	return &resolvedSeries{series: s, thread: thread}, nil
}

// threadSource names o's thread.
func threadSource(o Options) string {
	if o.ThreadSource == "" {
		return "series.mbox"
	}
	return o.ThreadSource
}

// Resolved is a series resolved as Submit resolves it (Resolve). An
// entry point that needs the series before it submits (the default
// pipeline's arches, a version to pin, a filter) resolves it with Resolve
// and hands it to Submit (Run, Check) in Options.Resolved: Submit stores
// it instead of resolving the thread again, so that an evaluation's
// series is resolved once from the entry point on (issue 33).
type Resolved struct {
	r *resolvedSeries
	// What it was resolved from: Submit takes it for the same thread,
	// sender rule and version only (else it resolves the thread itself).
	mbox      []byte
	source    string
	version   int
	anySender bool
}

// Resolve resolves o's series as Submit does: o.Mbox parsed (named
// o.ThreadSource), its series resolved with o.Version and o.AnySender.
// It stops when ctx is done.
func Resolve(ctx context.Context, o Options) (*Resolved, error) {
	if len(o.Mbox) == 0 {
		// No mbox to parse: series.Resolve says the thread has no
		// messages (as it says of an empty thread).
		_, err := resolve(ctx, mbox.NewThread(nil, threadSource(o)), series.Options{Version: o.Version, AnySender: o.AnySender})
		if err == nil {
			err = fail.Inputf("%s: no messages", threadSource(o))
		}
		return nil, err
	}
	r, err := resolveSeries(ctx, inputs{Options: o})
	if err != nil {
		return nil, err
	}
	return &Resolved{r: r, mbox: o.Mbox, source: threadSource(o), version: o.Version, anySender: o.AnySender}, nil
}

// Series is the series resolved (nil without r).
func (r *Resolved) Series() *series.Series {
	if r == nil {
		return nil
	}
	return r.r.get()
}

// reuse is r for in's series: what resolveSeries(in) gives, without
// resolving. nil when r is none or was resolved from something else (a
// different thread, sender rule or version). A series resolved as the
// newest version serves for that version asked for (series.Requested:
// the same series, its reason "vN requested"): the entry points resolve
// the newest and then submit the version it was.
func (r *Resolved) reuse(in inputs) *resolvedSeries {
	if r == nil || r.r == nil || r.source != threadSource(in.Options) || r.anySender != in.AnySender || !bytes.Equal(r.mbox, in.Mbox) {
		return nil
	}
	switch s := r.r.series; {
	case r.version == in.Version:
		return r.r
	case r.version == 0 && s != nil && s.Version == in.Version:
		return &resolvedSeries{series: s.Requested(), thread: r.r.thread}
	}
	return nil
}

// The stored form is series.Series's JSON with what that JSON leaves out
// (the messages' bodies, headers and raw text, the patches' commit
// messages and diffs, the attachments' data) added back, so that the
// series read back is the series resolved: the same commits, report,
// reply and recipients.
type (
	storedSeries struct {
		*series.Series
		// Cover and Patches shadow the Series' fields of the same JSON
		// name: the same values, with everything.
		Cover   *storedMessage   `json:"cover,omitempty"`
		Patches []*storedPatch   `json:"patches"`
		Thread  []numbers.Number `json:"thread_numbers,omitempty"`
	}
	storedPatch struct {
		*series.Patch
		Msg      *storedMessage `json:"msg,omitempty"`
		Message  string         `json:"message"`
		Diff     string         `json:"diff"`
		BelowCut string         `json:"below_cut,omitempty"`
	}
	storedMessage struct {
		*mbox.Message
		Body        string              `json:"body"`
		Header      map[string][]string `json:"header"`
		Raw         []byte              `json:"raw"`
		Attachments []storedAttachment  `json:"attachments"`
	}
	storedAttachment struct {
		mbox.Attachment
		Data []byte `json:"data"`
	}
)

// marshal is r's stored form. It fails on what JSON cannot carry as it
// is (a string that is not UTF-8, a date JSON cannot write): such a
// series is not stored, and the stages resolve it from the thread.
func (r *resolvedSeries) marshal() ([]byte, error) {
	s := r.series
	if s == nil {
		return nil, fmt.Errorf("no series")
	}
	st := storedSeries{Series: s, Cover: storeMessage(s.Cover), Thread: r.thread}
	if s.Patches != nil {
		st.Patches = make([]*storedPatch, 0, len(s.Patches))
	}
	for _, p := range s.Patches {
		if p == nil {
			st.Patches = append(st.Patches, nil)
			continue
		}
		st.Patches = append(st.Patches, &storedPatch{Patch: p, Msg: storeMessage(p.Msg), Message: p.Message, Diff: p.Diff, BelowCut: p.BelowCut})
	}
	if err := validUTF8(reflect.ValueOf(st)); err != nil {
		return nil, err
	}
	return json.Marshal(st)
}

// validUTF8 says which string in v is not UTF-8 (JSON would replace its
// bytes).
func validUTF8(v reflect.Value) error {
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return fmt.Errorf("not UTF-8: %.40q", v.String())
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return validUTF8(v.Elem())
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // []byte: base64
		}
		for i := range v.Len() {
			if err := validUTF8(v.Index(i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			if err := validUTF8(it.Key()); err != nil {
				return err
			}
			if err := validUTF8(it.Value()); err != nil {
				return err
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				if err := validUTF8(v.Field(i)); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func storeMessage(m *mbox.Message) *storedMessage {
	if m == nil {
		return nil
	}
	sm := &storedMessage{Message: m, Body: m.Body, Header: m.Header, Raw: m.Raw}
	if m.Attachments != nil {
		sm.Attachments = make([]storedAttachment, 0, len(m.Attachments))
	}
	for _, a := range m.Attachments {
		sm.Attachments = append(sm.Attachments, storedAttachment{Attachment: a, Data: a.Data})
	}
	return sm
}

// unmarshalSeries reads a stored form (marshal) back.
func unmarshalSeries(data []byte) (*resolvedSeries, error) {
	var st storedSeries
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, err
	}
	if st.Series == nil {
		return nil, fmt.Errorf("no series")
	}
	s := st.Series
	s.Cover = st.Cover.message()
	s.Patches = nil
	if st.Patches != nil {
		s.Patches = make([]*series.Patch, len(st.Patches))
	}
	for i, sp := range st.Patches {
		if sp == nil {
			continue
		}
		p := sp.Patch
		if p == nil {
			p = &series.Patch{}
		}
		p.Msg, p.Message, p.Diff, p.BelowCut = sp.Msg.message(), sp.Message, sp.Diff, sp.BelowCut
		s.Patches[i] = p
	}
	return &resolvedSeries{series: s, thread: st.Thread}, nil
}

func (sm *storedMessage) message() *mbox.Message {
	if sm == nil {
		return nil
	}
	m := sm.Message
	if m == nil {
		m = &mbox.Message{}
	}
	m.Body, m.Header, m.Raw = sm.Body, sm.Header, sm.Raw
	m.Attachments = nil
	if sm.Attachments != nil {
		m.Attachments = make([]mbox.Attachment, 0, len(sm.Attachments))
	}
	for _, a := range sm.Attachments {
		a.Attachment.Data = a.Data
		m.Attachments = append(m.Attachments, a.Attachment)
	}
	return m
}

// get is r's series (nil without r).
func (r *resolvedSeries) get() *series.Series {
	if r == nil {
		return nil
	}
	return r.series
}
