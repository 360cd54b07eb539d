package web

import (
	"context"
	"fmt"
	"html/template"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// quadratic are inputs on which goldmark's parser takes quadratic time
// (docs/adr/0092-markdown-budget.md): 64 KiB of each takes seconds.
func quadratic() map[string]string {
	return map[string]string{
		"link open": strings.Repeat("[a](", 16<<10),
		"quote run": strings.Repeat(">", 64<<10),
	}
}

func testRenderer(budget time.Duration) *renderer {
	return newRenderer(markdownOptions{maxBytes: 128 << 10, budget: budget, renders: 2, cacheBytes: 1 << 20})
}

// waitIdle waits until no render holds a slot: a render told to stop
// stops at goldmark's next step, long before it would have finished.
func waitIdle(t *testing.T, r *renderer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(r.slots) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a markdown render overran its budget and did not stop")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMarkdownQuadraticInputs: the quadratic inputs come back as plain
// text once the budget runs out, the render stops, and the outcome is
// cached, so the next view costs nothing.
func TestMarkdownQuadraticInputs(t *testing.T) {
	for name, src := range quadratic() {
		t.Run(name, func(t *testing.T) {
			r := testRenderer(50 * time.Millisecond)
			out := r.markdown(context.Background(), "blob1", []byte(src), "/b/", "/r/")
			if s, ok := out.(string); !ok || s != src {
				t.Fatalf("got %T, want the plain text", out)
			}
			waitIdle(t, r)
			if e, ok := r.cache.get("blob1\x00/b/\x00/r/"); !ok || !e.plain {
				t.Fatalf("cache holds %+v, %v; want the overrun", e, ok)
			}
			// Served from the cache: plain, without a render.
			r.slots <- struct{}{}
			r.slots <- struct{}{}
			if _, ok := r.markdown(context.Background(), "blob1", []byte(src), "/b/", "/r/").(string); !ok {
				t.Fatal("a cached overrun was rendered")
			}
		})
	}
}

// TestMarkdownStopUnwindsGoldmark: a render whose stop flag is set gets
// out of goldmark's parser at its first step.
func TestMarkdownStopUnwindsGoldmark(t *testing.T) {
	r := testRenderer(time.Hour)
	for name, src := range quadratic() {
		var stop atomic.Int32
		stop.Store(stopBudget)
		if out, ok := r.render([]byte(src), "/b/", "/r/", &stop); ok || out != "" {
			t.Errorf("%s: a stopped render returned %d bytes, %v", name, len(out), ok)
		}
	}
	var stop atomic.Int32
	if out, ok := r.render([]byte("# hi\n"), "/b/", "/r/", &stop); !ok || !strings.Contains(string(out), "<h1") {
		t.Errorf("an unstopped render: %q, %v", out, ok)
	}
}

// TestMarkdownLimits: larger than the limit, or with every slot taken, or
// for a client that went away, the text is plain; only renders and
// overruns are cached.
func TestMarkdownLimits(t *testing.T) {
	r := newRenderer(markdownOptions{maxBytes: 1 << 10, budget: time.Minute, renders: 1, cacheBytes: 1 << 20})
	big := strings.Repeat("# x\n", 1<<10)
	if out, ok := r.markdown(context.Background(), "big", []byte(big), "/b/", "/r/").(string); !ok || out != big {
		t.Fatal("a README over the limit was rendered")
	}
	r.slots <- struct{}{}
	if _, ok := r.markdown(context.Background(), "busy", []byte("# x\n"), "/b/", "/r/").(string); !ok {
		t.Fatal("a README was rendered while every slot was taken")
	}
	<-r.slots
	out := r.markdown(context.Background(), "busy", []byte("# x\n"), "/b/", "/r/")
	if h, ok := out.(template.HTML); !ok || !strings.Contains(string(h), "<h1") {
		t.Fatalf("a README was not rendered once a slot was free: %v", out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := r.markdown(ctx, "gone", []byte(quadratic()["quote run"][:1<<10]), "/b/", "/r/").(string); !ok {
		t.Fatal("a render for a client that went away was waited for")
	}
	waitIdle(t, r)
	if _, ok := r.cache.get("gone\x00/b/\x00/r/"); ok {
		t.Fatal("a render stopped because the client went away was cached")
	}
}

// TestMarkdownCacheByBlob: a README is rendered once per blob and link
// bases; the cache keeps the most recent renders within its bytes.
func TestMarkdownCacheByBlob(t *testing.T) {
	r := testRenderer(time.Minute)
	first := r.markdown(context.Background(), "b1", []byte("[x](y)\n"), "/o/r/-/blob/main/", "/o/r/-/raw/main/")
	if h, _ := first.(template.HTML); !strings.Contains(string(h), `href="/o/r/-/blob/main/y"`) {
		t.Fatalf("render: %v", first)
	}
	r.slots <- struct{}{}
	r.slots <- struct{}{}
	if again := r.markdown(context.Background(), "b1", []byte("[x](y)\n"), "/o/r/-/blob/main/", "/o/r/-/raw/main/"); again != first {
		t.Fatalf("the second view was not served from the cache: %v", again)
	}
	if other, ok := r.markdown(context.Background(), "b1", []byte("[x](y)\n"), "/o/r/-/blob/dev/", "/o/r/-/raw/dev/").(string); !ok {
		t.Fatalf("other link bases were served another ref's render: %v", other)
	}

	c := newHTMLCache(3 * (64 + 10 + 100))
	for i := range 4 {
		c.put(fmt.Sprint("key", i, "xxxxx"), cached{html: template.HTML(strings.Repeat("h", 100))})
	}
	if _, ok := c.get("key0xxxxx"); ok {
		t.Error("the least recently used render was kept past the cache's bytes")
	}
	for i := 1; i < 4; i++ {
		if _, ok := c.get(fmt.Sprint("key", i, "xxxxx")); !ok {
			t.Errorf("render %d was evicted", i)
		}
	}
	c.put("huge", cached{html: template.HTML(strings.Repeat("h", 1000))})
	if _, ok := c.get("huge"); ok || c.size > c.max {
		t.Error("a render larger than the cache was kept")
	}
}
