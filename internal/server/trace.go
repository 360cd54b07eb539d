package server

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/ghost-scm/ghost/internal/httpx"
)

// gitOp names a git smart-HTTP request for its span: "git fetch" and
// "git push" for the requests that move objects, with " refs" for their
// advertisements; "" for anything else (dumb HTTP, which is refused).
func gitOp(r *http.Request) (op, repo string) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	for _, suffix := range []string{"/git-upload-pack", "/git-receive-pack", "/info/refs"} {
		if rest, ok := strings.CutSuffix(p, suffix); ok {
			repo = strings.TrimSuffix(rest, ".git")
			service := strings.TrimPrefix(suffix, "/")
			refs := ""
			if suffix == "/info/refs" {
				service, refs = r.URL.Query().Get("service"), " refs"
			}
			switch service {
			case "git-upload-pack":
				return "git fetch" + refs, repo
			case "git-receive-pack":
				return "git push" + refs, repo
			}
		}
	}
	return "", ""
}

// traceGit wraps the git handler: a span per fetch and push, continuing
// the caller's trace when the request carries W3C trace context
// (docs/adr/0101-health-metrics-traces.md).
func traceGit(tracer trace.Tracer, next http.Handler) http.Handler {
	prop := propagation.TraceContext{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		op, repo := gitOp(r)
		if op == "" {
			next.ServeHTTP(w, r)
			return
		}
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("ghost.transport", "http"), attribute.String("ghost.repo", repo),
			attribute.String("http.request.method", r.Method)))
		defer span.End()
		lw := &httpx.StatusWriter{ResponseWriter: w}
		next.ServeHTTP(lw, r.WithContext(ctx))
		status := lw.Status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status), attribute.Int64("ghost.response_bytes", lw.Bytes))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// traceSSH starts the span of a git command over SSH.
func traceSSH(ctx context.Context, tracer trace.Tracer, write bool, owner, name string) (context.Context, trace.Span) {
	op := "git fetch"
	if write {
		op = "git push"
	}
	return tracer.Start(ctx, op, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
		attribute.String("ghost.transport", "ssh"), attribute.String("ghost.repo", owner+"/"+name)))
}
