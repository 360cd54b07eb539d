package web

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
)

// BenchmarkGoldmarkQuadratic times goldmark (as ghost configures it, GFM,
// without ghost's budget) on the inputs reported in
// docs/adr/0092-markdown-budget.md, at doubling sizes, next to ordinary
// markdown of the same size as the linear reference: each doubling of a
// quadratic input takes three to six times as long, ordinary markdown
// about twice.
//
//	go test -run '^$' -bench GoldmarkQuadratic -benchtime 1x ./internal/web/
func BenchmarkGoldmarkQuadratic(b *testing.B) {
	md := goldmark.New(goldmark.WithExtensions(extension.GFM))
	inputs := map[string]func(n int) string{
		"link-open": func(n int) string { return strings.Repeat("[a](", n/4) },
		"quote-run": func(n int) string { return strings.Repeat(">", n) },
		"ordinary":  func(n int) string { return strings.Repeat("Some *text* with a [link](x) and `code`.\n\n", n/42) },
	}
	for _, name := range []string{"ordinary", "link-open", "quote-run"} {
		for _, kib := range []int{16, 32, 64} {
			src := []byte(inputs[name](kib << 10))
			b.Run(fmt.Sprintf("%s/%dKiB", name, kib), func(b *testing.B) {
				for b.Loop() {
					var buf bytes.Buffer
					if err := md.Convert(src, &buf); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
