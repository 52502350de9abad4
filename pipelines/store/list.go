package store

import (
	"context"
	"strings"

	"github.com/patcheval/patcheval/internal/fail"
)

// ListFilter selects and pages evaluations for List. Empty fields match
// everything.
type ListFilter struct {
	Status   string // exact status
	Pipeline string // exact pipeline name
	// Series matches the series' message-id or a substring of its title.
	Series string
	// Tree is the exact tree the series was applied to (as stored).
	Tree string
	// Arch selects the evaluations with a build for that arch (one not
	// built yet has no arch).
	Arch string
	// Limit is the page size (0: no limit); Offset skips that many of the
	// newest first.
	Limit, Offset int
}

// List returns one page of the evaluations f selects, newest first, and
// how many f selects in all.
func (s *Store) List(ctx context.Context, f ListFilter) ([]*Evaluation, int, error) {
	var where []string
	var args []any
	if f.Status != "" {
		where = append(where, "e.status = ?")
		args = append(args, f.Status)
	}
	if f.Pipeline != "" {
		where = append(where, "e.pipeline = ?")
		args = append(args, f.Pipeline)
	}
	if f.Series != "" {
		where = append(where, "(e.series_msgid = ? OR "+s.d.instr+"(lower(e.series_title), lower(?)) > 0)")
		args = append(args, strings.Trim(f.Series, "<>"), f.Series)
	}
	if f.Tree != "" {
		where = append(where, "e.tree = ?")
		args = append(args, f.Tree)
	}
	if f.Arch != "" {
		where = append(where, "EXISTS (SELECT 1 FROM builds b WHERE b.evaluation_id = e.id AND b.arch = ?)")
		args = append(args, f.Arch)
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	var total int
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM evaluations e`+cond, args...).Scan(&total); err != nil {
		return nil, 0, fail.Infraf("store: %s: counting evaluations: %w", s.where, err)
	}
	q := `SELECT ` + evalColumns + ` FROM evaluations e` + cond + ` ORDER BY e.id DESC`
	if f.Limit > 0 {
		// The page's ids first: Postgres computes the select list's
		// counts for the rows an OFFSET skips too (page 10 cost ten
		// times page 1).
		q = `SELECT ` + evalColumns + ` FROM evaluations e WHERE e.id IN (SELECT e.id FROM evaluations e` + cond +
			` ORDER BY e.id DESC LIMIT ? OFFSET ?) ORDER BY e.id DESC`
		args = append(args, f.Limit, max(0, f.Offset))
	}
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, 0, fail.Infraf("store: %s: listing evaluations: %w", s.where, err)
	}
	defer rows.Close()
	var out []*Evaluation
	for rows.Next() {
		e, err := scanEvaluation(rows)
		if err != nil {
			return nil, 0, fail.Infraf("store: %s: %w", s.where, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fail.Infraf("store: %s: %w", s.where, err)
	}
	return out, total, nil
}

// ListChoices are the values List's filters can match, as the store
// holds them: for pickers and for saying that a value matches nothing.
type ListChoices struct {
	Pipelines, Trees, Arches []string
}

// Choices returns the distinct pipelines and trees of the stored
// evaluations and the arches of their builds, each sorted.
func (s *Store) Choices(ctx context.Context) (ListChoices, error) {
	var c ListChoices
	for _, q := range []struct {
		into *[]string
		sql  string
	}{
		{&c.Pipelines, `SELECT DISTINCT pipeline FROM evaluations WHERE pipeline <> '' ORDER BY pipeline`},
		{&c.Trees, `SELECT DISTINCT tree FROM evaluations WHERE tree <> '' ORDER BY tree`},
		{&c.Arches, `SELECT DISTINCT arch FROM builds WHERE arch <> '' ORDER BY arch`},
	} {
		rows, err := s.db.QueryContext(ctx, q.sql)
		if err != nil {
			return c, fail.Infraf("store: %s: listing filter values: %w", s.where, err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return c, fail.Infraf("store: %s: listing filter values: %w", s.where, err)
			}
			*q.into = append(*q.into, v)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return c, fail.Infraf("store: %s: listing filter values: %w", s.where, err)
		}
	}
	return c, nil
}
