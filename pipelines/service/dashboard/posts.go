package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/pipelines/store"
)

// Posts is the reporters' side of the /posts page (the bots of issue 13:
// Patchwork checks, GitHub statuses and comments, reply mails). The page
// lists the store's outbox (store.Posts); Approve is its button for a
// held (moderated) reply mail: it releases the mail for sending.
type Posts interface {
	Approve(ctx context.Context, postID int64) error
}

type postView struct {
	*store.Post
	// Link is the remote id when it is a URL.
	Link string
	// Mail is a held mail's draft.
	Mail *report.Draft
}

func (d *Dashboard) posts(w http.ResponseWriter, r *http.Request) {
	st := d.src.Store()
	held, err := st.Posts(0, store.PostHeld, 200)
	if err != nil {
		d.fail(w, err)
		return
	}
	all, err := st.Posts(0, r.URL.Query().Get("status"), 500)
	if err != nil {
		d.fail(w, err)
		return
	}
	d.render(w, "posts", struct {
		page
		Held, All  []postView
		CanApprove bool
		Statuses   []string
		Status     string
	}{page{Title: "posts", Where: d.opt.Where, Refresh: 30}, postViews(held), postViews(all), d.opt.Posts != nil,
		[]string{store.PostHeld, store.PostQueued, store.PostSending, store.PostSent, store.PostSkipped, store.PostFailed},
		r.URL.Query().Get("status")})
}

func postViews(ps []*store.Post) []postView {
	out := make([]postView, 0, len(ps))
	for _, p := range ps {
		v := postView{Post: p}
		if strings.HasPrefix(p.RemoteID, "https://") || strings.HasPrefix(p.RemoteID, "http://") {
			v.Link = p.RemoteID
		}
		if p.Status == store.PostHeld {
			var dr report.Draft
			if json.Unmarshal([]byte(p.Payload), &dr) == nil && dr.Subject != "" {
				v.Mail = &dr
			}
		}
		out = append(out, v)
	}
	return out
}

func (d *Dashboard) approve(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		d.fail(w, fail.Inputf("post %q: not a post id", r.PathValue("id")))
		return
	}
	if err := d.opt.Posts.Approve(r.Context(), id); err != nil {
		d.actionFailed(w, err)
		return
	}
	http.Redirect(w, r, "/posts", http.StatusSeeOther)
}
