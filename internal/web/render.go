package web

import (
	"bytes"
	"html/template"
	"path"
	"strings"

	"github.com/alecthomas/chroma/v2"
	chromahtml "github.com/alecthomas/chroma/v2/formatters/html"
	"github.com/alecthomas/chroma/v2/lexers"
	"github.com/alecthomas/chroma/v2/styles"
	"github.com/microcosm-cc/bluemonday"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/text"
)

// renderer turns READMEs and source files into HTML. Markdown is
// rendered by goldmark (raw HTML is escaped, not passed through) and then
// sanitized by bluemonday anyway; source is highlighted by chroma with CSS
// classes, never inline styles, so the Content-Security-Policy can forbid
// inline styles.
type renderer struct {
	md     goldmark.Markdown
	policy *bluemonday.Policy
	format *chromahtml.Formatter
}

func newRenderer() *renderer {
	return &renderer{
		md:     goldmark.New(goldmark.WithExtensions(extension.GFM)),
		policy: bluemonday.UGCPolicy(),
		format: chromahtml.New(chromahtml.WithClasses(true), chromahtml.WithLineNumbers(true), chromahtml.WithLinkableLineNumbers(true, "L"), chromahtml.TabWidth(4)),
	}
}

// markdown renders and sanitizes src. Relative links point into the
// repository: files at blobBase, images at rawBase (both end in "/").
func (r *renderer) markdown(src []byte, blobBase, rawBase string) template.HTML {
	doc := r.md.Parser().Parse(text.NewReader(src))
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
		return template.HTML("<pre>" + template.HTMLEscapeString(string(src)) + "</pre>")
	}
	return template.HTML(r.policy.SanitizeBytes(buf.Bytes())) // sanitized
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
func (r *renderer) highlight(name string, src []byte) template.HTML {
	lexer := lexers.Match(name)
	if lexer == nil {
		lexer = lexers.Analyse(string(src))
	}
	if lexer == nil {
		lexer = lexers.Fallback
	}
	lexer = chroma.Coalesce(lexer)
	it, err := lexer.Tokenise(nil, string(src))
	if err != nil {
		return plain(src)
	}
	var buf bytes.Buffer
	if err := r.format.Format(&buf, styles.Get("github"), it); err != nil {
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
