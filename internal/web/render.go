package web

import (
	"bytes"
	"container/list"
	"context"
	"errors"
	"html/template"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// renderer turns READMEs and source files into HTML. Markdown is
// rendered by goldmark (raw HTML is escaped, not passed through) and then
// sanitized by bluemonday anyway; source is highlighted by chroma with CSS
// classes, never inline styles, so the Content-Security-Policy can forbid
// inline styles.
//
// goldmark's parser takes quadratic time on some inputs (a run of "[a](",
// a long run of ">"; docs/adr/0092-markdown-budget.md), so markdown is
// rendered only below a size limit, under a time budget, by at most a
// few renders at once, and the outcome is cached by blob id; past the
// limit or the budget, or while every render slot is taken, the page
// shows the text plain.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
	format *chromahtml.Formatter

	mdMax  int           // largest markdown rendered, in bytes
	budget time.Duration // time one render may take
	// slots holds one token per markdown render running, including
	// renders that overran their budget and have yet to notice: the CPU
	// that markdown can take is bounded whatever the input.
	slots chan struct{}
	cache *htmlCache
}

// markdownOptions are the renderer's bounds (web.Options).
type markdownOptions struct {
	maxBytes   int64
	budget     time.Duration
	renders    int
	cacheBytes int64
}

func newRenderer(o markdownOptions) *renderer {
	return &renderer{
		md: goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithParserOptions(
			parser.WithBlockParsers(util.Prioritized(budgetBlock{}, 0)),
			parser.WithInlineParsers(util.Prioritized(budgetInline{}, 0)),
		)),
		policy: bluemonday.UGCPolicy(),
		format: chromahtml.New(chromahtml.WithClasses(true), chromahtml.WithLineNumbers(true), chromahtml.WithLinkableLineNumbers(true, "L"), chromahtml.TabWidth(4)),
		mdMax:  int(o.maxBytes),
		budget: o.budget,
		slots:  make(chan struct{}, max(o.renders, 1)),
		cache:  newHTMLCache(o.cacheBytes),
	}
}

// markdown returns the README src, the blob id, as sanitized HTML, or as
// plain text (a string) when it is larger than the limit, when its render
// overran the budget, when every render slot is taken, or when the client
// went away. Relative links point into the repository: files at blobBase,
// images at rawBase (both end in "/"). Renders and overruns are cached by
// blob id and bases, so a README costs its render once, not once per view.
func (r *renderer) markdown(ctx context.Context, id string, src []byte, blobBase, rawBase string) any {
	if len(src) > r.mdMax {
		return string(src)
	}
	key := id + "\x00" + blobBase + "\x00" + rawBase
	if e, ok := r.cache.get(key); ok {
		if e.plain {
			return string(src)
		}
		return e.html
	}
	select {
	case r.slots <- struct{}{}:
	default:
		return string(src) // busy: plain now, rendered on a later view
	}
	var stop atomic.Int32 // why the render must stop: 0 go on, stopBudget, stopGone
	done := make(chan template.HTML, 1)
	go func() {
		defer func() { <-r.slots }()
		html, ok := r.render(src, blobBase, rawBase, &stop)
		switch {
		case ok:
			r.cache.put(key, cached{html: html})
		case stop.Load() == stopBudget:
			r.cache.put(key, cached{plain: true})
		}
		done <- html // "" when stopped
	}()
	t := time.NewTimer(r.budget)
	defer t.Stop()
	select {
	case html := <-done:
		if html == "" {
			return string(src)
		}
		return html
	case <-t.C:
		stop.CompareAndSwap(0, stopBudget)
	case <-ctx.Done():
		stop.CompareAndSwap(0, stopGone)
	}
	return string(src)
}

// Why a render stops early.
const (
	stopBudget = 1 + iota
	stopGone
)

// render parses, rewrites links, renders and sanitizes src. It reports
// false when stop was set while goldmark was still parsing (the guard
// parsers below panic with errStopRender to get out of it).
func (r *renderer) render(src []byte, blobBase, rawBase string, stop *atomic.Int32) (out template.HTML, ok bool) {
	defer func() {
		if v := recover(); v != nil {
			if v != errStopRender {
				panic(v)
			}
			out, ok = "", false
		}
	}()
	pc := parser.NewContext()
	pc.Set(stopKey, stop)
	doc := r.md.Parser().Parse(text.NewReader(src), parser.WithContext(pc))
	if stop.Load() != 0 {
		return "", false
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Link:
			n.Destination = rebase(n.Destination, blobBase)
		case *ast.Image:
			n.Destination = rebase(n.Destination, rawBase)
		}
		return ast.WalkContinue, nil
	})
	var buf bytes.Buffer
	if err := r.md.Renderer().Render(&buf, src, doc); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(string(src)) + "</pre>"), true
	}
	if stop.Load() != 0 {
		return "", false
	}
	return template.HTML(r.policy.SanitizeBytes(buf.Bytes())), true // sanitized
}

// stopKey holds a render's stop flag in goldmark's parser context.
var stopKey = parser.NewContextKey()

// errStopRender unwinds goldmark's parser when its render must stop.
var errStopRender = errors.New("markdown render stopped")

// checkStop panics with errStopRender when the render's stop flag is set.
// goldmark has no cancellation; the guard parsers call this from inside
// its loops, which is where its quadratic cases spend their time.
func checkStop(pc parser.Context) {
	if f, ok := pc.Get(stopKey).(*atomic.Int32); ok && f.Load() != 0 {
		panic(errStopRender)
	}
}

// budgetInline is an inline parser that parses nothing: goldmark calls it
// first on every character that may start a link, image, emphasis, code
// span, autolink or entity, which includes each step of the quadratic
// link scan, and it stops the render there once told to.
type budgetInline struct{}

func (budgetInline) Trigger() []byte { return []byte("[]!(<*_~`\\&") }

func (budgetInline) Parse(_ ast.Node, _ text.Reader, pc parser.Context) ast.Node {
	checkStop(pc)
	return nil
}

// budgetBlock is a block parser that opens nothing: goldmark asks it
// first whenever it tries to open a block, which includes each level of
// a run of ">" (quadratic in goldmark), and it stops the render there.
type budgetBlock struct{}

func (budgetBlock) Trigger() []byte {
	b := make([]byte, 0, 255)
	for c := 1; c < 256; c++ {
		if c != '\n' {
			b = append(b, byte(c))
		}
	}
	return b
}

func (budgetBlock) Open(_ ast.Node, _ text.Reader, pc parser.Context) (ast.Node, parser.State) {
	checkStop(pc)
	return nil, parser.NoChildren
}

func (budgetBlock) Continue(ast.Node, text.Reader, parser.Context) parser.State { return parser.Close }

func (budgetBlock) Close(ast.Node, text.Reader, parser.Context) {}

func (budgetBlock) CanInterruptParagraph() bool { return true }

func (budgetBlock) CanAcceptIndentedLine() bool { return true }

// cached is a README's render: its HTML, or that it overran its budget.
type cached struct {
	html  template.HTML
	plain bool
}

// htmlCache is a least-recently-used cache of renders, bounded by the
// bytes of HTML it holds.
type htmlCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	order *list.List // of *cacheEntry, most recent first
	byKey map[string]*list.Element
}

type cacheEntry struct {
	key string
	val cached
}

func newHTMLCache(maxBytes int64) *htmlCache {
	return &htmlCache{max: maxBytes, order: list.New(), byKey: map[string]*list.Element{}}
}

func (e *cacheEntry) size() int64 { return int64(len(e.key) + len(e.val.html) + 64) }

func (c *htmlCache) get(key string) (cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.byKey[key]
	if !ok {
		return cached{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*cacheEntry).val, true
}

func (c *htmlCache) put(key string, v cached) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := &cacheEntry{key: key, val: v}
	if e.size() > c.max {
		return
	}
	if el, ok := c.byKey[key]; ok {
		c.size -= el.Value.(*cacheEntry).size()
		c.order.Remove(el)
	}
	c.byKey[key] = c.order.PushFront(e)
	c.size += e.size()
	for c.size > c.max {
		el := c.order.Back()
		old := el.Value.(*cacheEntry)
		c.order.Remove(el)
		delete(c.byKey, old.key)
		c.size -= old.size()
	}
}

// rebase resolves a relative link of a file at the repository's root
// against base; absolute URLs, absolute paths and fragments stay.
func rebase(dest []byte, base string) []byte {
	d := string(dest)
	if d == "" || strings.HasPrefix(d, "#") || strings.HasPrefix(d, "/") || strings.Contains(strings.SplitN(d, "/", 2)[0], ":") {
		return dest
	}
	p, frag, _ := strings.Cut(d, "#")
	p, _, _ = strings.Cut(p, "?")
	clean := strings.TrimPrefix(path.Clean("/"+p), "/")
	out := base + pathURL(clean)
	if frag != "" {
		out += "#" + frag
	}
	return []byte(out)
}

// highlight renders src as highlighted code with line numbers; plain
// (escaped) when no lexer fits or highlighting fails.
//
// A lexer is picked by the file's name only: guessing from the content
// (lexers.Analyse) picks wrong ones. And a name can fit the wrong lexer
// too (chroma takes go.mod for AMPL, whose *.mod it claims): a lexer that
// cannot place some of the text marks it as errors, which would show as
// white-on-red boxes (issue 21 §8), so such a file is shown plain.
func (r *renderer) highlight(name string, src []byte) template.HTML {
	lexer := lexers.Match(name)
	if lexer == nil {
		return plain(src)
	}
	it, err := chroma.Coalesce(lexer).Tokenise(nil, string(src))
	if err != nil {
		return plain(src)
	}
	tokens := it.Tokens()
	for _, t := range tokens {
		if t.Type == chroma.Error {
			return plain(src)
		}
	}
	var buf bytes.Buffer
	if err := r.format.Format(&buf, styles.Get("github"), chroma.Literator(tokens...)); err != nil {
		return plain(src)
	}
	return template.HTML(buf.String())
}

// plain renders text escaped, with line numbers, in the markup chroma
// uses, for files too large to highlight.
func plain(src []byte) template.HTML {
	var b strings.Builder
	b.WriteString(`<pre class="chroma"><code>`)
	for i, line := range strings.SplitAfter(string(src), "\n") {
		if line == "" {
			continue
		}
		b.WriteString(`<span class="line"><span class="ln">`)
		b.WriteString(itoa(i + 1))
		b.WriteString(`</span><span class="cl">`)
		b.WriteString(template.HTMLEscapeString(line))
		b.WriteString("</span></span>")
	}
	b.WriteString("</code></pre>")
	return template.HTML(b.String())
}

// chromaCSS is the stylesheet for chroma's classes.
func (r *renderer) chromaCSS() []byte {
	var buf bytes.Buffer
	_ = r.format.WriteCSS(&buf, styles.Get("github"))
	return buf.Bytes()
}

// isBinary uses git's rule: a NUL in the first 8000 bytes.
func isBinary(b []byte) bool {
	if len(b) > 8000 {
		b = b[:8000]
	}
	return bytes.IndexByte(b, 0) >= 0
}
