package tracing

import (
	"context"
	"strings"
	"testing"
)

func TestSetup(t *testing.T) {
	ctx := context.Background()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "")
	p, err := Setup(ctx, "ghost", "test")
	if err != nil || p.Endpoint != "" {
		t.Fatalf("without an endpoint: %+v, %v", p, err)
	}
	_, span := p.Tracer().Start(ctx, "x")
	if span.SpanContext().IsValid() {
		t.Error("a span is recorded without an endpoint")
	}
	span.End()

	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
	t.Setenv("OTEL_SDK_DISABLED", "true")
	if Enabled() {
		t.Error("OTEL_SDK_DISABLED=true is not honoured")
	}
	t.Setenv("OTEL_SDK_DISABLED", "")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "carrier-pigeon")
	if _, err := Setup(ctx, "ghost", "test"); err == nil || !strings.Contains(err.Error(), "http/protobuf and grpc") {
		t.Errorf("an unknown protocol: %v", err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	p, err = Setup(ctx, "ghost", "test")
	if err != nil || !strings.Contains(p.Endpoint, "(grpc)") {
		t.Fatalf("grpc: %+v %v", p, err)
	}
	_, span = p.Tracer().Start(ctx, "x")
	if !span.SpanContext().IsValid() {
		t.Error("no span recorded with an endpoint")
	}
	span.End()
	sctx, cancel := context.WithTimeout(ctx, 0)
	defer cancel()
	p.Shutdown(sctx) // nothing listens; the export is dropped
}
