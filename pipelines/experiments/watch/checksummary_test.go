package watch

import (
	"strings"
	"testing"
	"time"

	"github.com/patcheval/patcheval/pipelines/store"
)

// TestCheckSummaryIsHonest: a watch whose only new tag failed on infra
// does not say "ok" (it said "last check ok").
func TestCheckSummaryIsHonest(t *testing.T) {
	now := time.Now()
	h := &History{Tags: []TagEntry{
		{WatchTag: &store.WatchTag{Tag: "v6.1", Status: store.TagKnown, Updated: now}},
		{WatchTag: &store.WatchTag{Tag: "v6.2", Status: store.TagInfra, ErrorText: "lore.kernel.org unreachable\nmore", Updated: now.Add(-time.Minute)}},
	}}
	got := h.CheckSummary()
	if strings.HasPrefix(got, "ok") || !strings.Contains(got, "v6.2 infra: lore.kernel.org unreachable") {
		t.Errorf("CheckSummary = %q; want the infra tag named, no ok", got)
	}
	h.Tags = append(h.Tags, TagEntry{WatchTag: &store.WatchTag{Tag: "v6.3", Status: store.TagDone, Updated: now.Add(time.Minute)}})
	if got := h.CheckSummary(); got != "ok (latest tag v6.3 done)" {
		t.Errorf("CheckSummary = %q after a good tag", got)
	}
}
