package dashboard

import "testing"

// TestJobWords: River's words do not reach the pages: a job stopped for
// good (River's JobCancel, state "cancelled") of a failed evaluation is
// "failed", and its error has no JobCancelError prefix.
func TestJobWords(t *testing.T) {
	if got := jobState("cancelled", true); got != "failed" {
		t.Errorf("a cancelled job with errors: %q, want failed", got)
	}
	if got := jobState("discarded", true); got != "failed" {
		t.Errorf("a discarded job: %q, want failed", got)
	}
	if got := jobState("cancelled", false); got != "cancelled" {
		t.Errorf("a job cancelled by hand: %q, want cancelled", got)
	}
	if got := jobError("JobCancelError: build voluntary/ppc64le: kernel: make failed\\nmore"); got != "build voluntary/ppc64le: kernel: make failed\\nmore" {
		t.Errorf("jobError: %q", got)
	}
}
