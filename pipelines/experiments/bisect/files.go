package bisect

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/patcheval/patcheval/evaluate/report"
	"github.com/patcheval/patcheval/internal/fail"
	"github.com/patcheval/patcheval/mbox"
)

// WriteReports writes a bisection's reports into dir (report.txt,
// report.md, report.json; with a culprit kcidb.json, and culprit.eml, the
// draft to the culprit's author, when from is set) and returns their
// paths, report.txt first.
func WriteReports(dir string, r *Result, c Context, from mbox.Address) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fail.Infra(err)
	}
	var files []string
	write := func(name string, fn func(f *os.File) error) error {
		path := filepath.Join(dir, name)
		f, err := os.Create(path)
		if err != nil {
			return fail.Infra(err)
		}
		if err := fn(f); err != nil {
			f.Close()
			return err
		}
		files = append(files, path)
		return f.Close()
	}
	for _, x := range []struct {
		name string
		fn   func(f *os.File) error
	}{
		{"report.txt", func(f *os.File) error { return WriteText(f, r, c) }},
		{"report.md", func(f *os.File) error { return WriteMarkdown(f, r, c) }},
		{"report.json", func(f *os.File) error { return WriteJSON(f, r, c) }},
	} {
		if err := write(x.name, x.fn); err != nil {
			return files, err
		}
	}
	if r.Status != Found {
		return files, nil
	}
	if err := write("kcidb.json", func(f *os.File) error { return WriteKCIDB(f, r, c) }); err != nil {
		return files, err
	}
	if from.Email != "" {
		d, err := Draft(r, c, from, time.Time{})
		if err != nil {
			return files, err
		}
		if err := write("culprit.eml", func(f *os.File) error { return report.WriteDraft(f, *d) }); err != nil {
			return files, fmt.Errorf("reply draft: %w", err)
		}
	}
	return files, nil
}
