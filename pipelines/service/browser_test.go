package service

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/patcheval/patcheval/internal/testenv"
)

// browser starts headless Debian chromium (root-safe flags, a fresh
// profile, no network services of its own).
func browser(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if testenv.SkipSlow() {
			t.Skip("PATCHEVAL_SKIP_SLOW=1 and no chromium")
		}
		t.Fatalf("chromium is not installed (.ci/install-deps installs it): %v", err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	return ctx, func() { cancelT(); cancelC(); cancelA() }
}

// visitDashboard drives a real browser through the dashboard: the list,
// a click on the evaluation's link, the verdict table and an SVG plot on
// the evaluation page; it saves screenshots into dir and returns the
// evaluation page's text.
func visitDashboard(t *testing.T, base string, id int64, dir string) string {
	t.Helper()
	ctx, cancel := browser(t)
	defer cancel()
	link := `#evaluations a[href="/evaluations/` + itoa(id) + `"]`
	fatal := func(what string, err error) {
		if err != nil {
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	fatal("open the list", chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`#evaluations`)))
	list, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	fatal("screenshot", err)
	fatal("follow the link", chromedp.Do(ctx, chromedp.Click(link, chromedp.NodeVisible), chromedp.WaitVisible(`#verdicts`)))
	verdicts, err := chromedp.Run(ctx, chromedp.Text(`#verdicts`))
	fatal("verdict table", err)
	svgs, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(".plot svg").length`))
	fatal("plots", err)
	title, err := chromedp.Run(ctx, chromedp.Title())
	fatal("title", err)
	page, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	fatal("screenshot", err)
	bg := `getComputedStyle(document.body).backgroundColor`
	light, err := chromedp.Run(ctx, chromedp.Evaluate[string](bg))
	fatal("background", err)
	// The same page with the browser in dark mode.
	fatal("dark mode", chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	})))
	dark, err := chromedp.Run(ctx, chromedp.Evaluate[string](bg))
	fatal("background", err)
	if dark == light {
		t.Errorf("the page does not follow prefers-color-scheme: background %s in both", dark)
	}
	darkPage, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	fatal("screenshot", err)
	for name, png := range map[string][]byte{"dashboard-list.png": list, "dashboard-evaluation.png": page, "dashboard-evaluation-dark.png": darkPage} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", p, len(png))
	}
	if svgs == 0 {
		t.Errorf("evaluation page has no SVG plot")
	}
	if !strings.Contains(verdicts, "regression") || !strings.Contains(verdicts, "kill") {
		t.Errorf("verdict table lacks the kill regression:\n%s", verdicts)
	}
	if !strings.HasPrefix(title, "#"+itoa(id)) {
		t.Errorf("followed the link to %q, want evaluation %d", title, id)
	}
	return verdicts
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestDashboardInBrowser: headless Chromium opens the dashboard of a
// service holding stored evaluations, follows the link to one, finds the
// verdict table and the SVG plots and saves screenshots (paths in the
// log; PATCHEVAL_SCREENSHOTS=DIR keeps them).
func TestDashboardInBrowser(t *testing.T) {
	s, base := testService(t, Config{})
	ids := recordEvaluations(t, s, 3, 2)
	dir := os.Getenv("PATCHEVAL_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	visitDashboard(t, base, ids[1], dir)
}
