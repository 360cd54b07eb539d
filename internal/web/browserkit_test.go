package web_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// browser is a headless Chromium for one test: its steps run within two
// minutes, and screenshots go to shots, named prefix+name.png.
type browser struct {
	t      *testing.T
	ctx    context.Context
	shots  string
	prefix string
}

// newBrowser starts Chromium at exe; the test's cleanup closes it.
func newBrowser(t *testing.T, exe, shots, prefix string) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1100, 760),
	}
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelA)
	bctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(cancelB) // closes the browser
	// The first run starts the browser and must not have a timeout.
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	tctx, cancelT := context.WithTimeout(bctx, 2*time.Minute)
	t.Cleanup(cancelT)
	return &browser{t: t, ctx: tctx, shots: shots, prefix: prefix}
}

// shot is a step that saves a screenshot.
func (b *browser) shot(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		png, err := chromedp.CaptureScreenshot()(ctx, tg)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(b.shots, b.prefix+name+".png"), png, 0o644)
	})
}

// do runs steps, failing the test with step's name.
func (b *browser) do(step string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", step, err)
	}
}

// text is the page's text.
func (b *browser) text() string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS("body")))
	if err != nil {
		b.t.Fatalf("page text: %v", err)
	}
	return s
}
