// Package tracing sets up OpenTelemetry traces for "ghost serve" and
// "ghost worker": spans of pushes, fetches and scans, exported over OTLP
// when the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and nothing at all
// otherwise (docs/adr/0101-health-metrics-traces.md).
//
// Every standard variable applies, read by the OpenTelemetry SDK itself:
// OTEL_EXPORTER_OTLP_PROTOCOL (or _TRACES_PROTOCOL: http/protobuf, the
// default, or grpc), _HEADERS, _TIMEOUT, _INSECURE, _CERTIFICATE,
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and
// its argument, OTEL_BSP_* for batching. The provider is returned, never
// installed globally: components take a trace.Tracer from it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// Name is the instrumentation scope of ghost's spans.
const Name = "github.com/ghost-scm/ghost"

// Enabled reports whether the environment asks for traces: an OTLP
// endpoint is set, and OTEL_SDK_DISABLED is not "true".
func Enabled() bool {
	if strings.EqualFold(os.Getenv("OTEL_SDK_DISABLED"), "true") {
		return false
	}
	return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Provider is the process's tracer provider and how to stop it.
type Provider struct {
	trace.TracerProvider
	// Endpoint says where spans go, for the start-up line; "" when off.
	Endpoint string
	shutdown func(context.Context) error
}

// Tracer returns ghost's tracer.
func (p *Provider) Tracer() trace.Tracer { return p.TracerProvider.Tracer(Name) }

// Shutdown flushes the spans not yet sent, within ctx.
func (p *Provider) Shutdown(ctx context.Context) error {
	if p.shutdown == nil {
		return nil
	}
	return p.shutdown(ctx)
}

// Setup returns the provider the environment asks for: an OTLP exporter
// behind a batch processor when Enabled, else one that records nothing.
// service is the default service.name (OTEL_SERVICE_NAME overrides it).
func Setup(ctx context.Context, service, version string) (*Provider, error) {
	if !Enabled() {
		return &Provider{TracerProvider: noop.NewTracerProvider()}, nil
	}
	exp, err := exporter(ctx)
	if err != nil {
		return nil, err
	}
	res, err := resource.Merge(
		resource.NewSchemaless(attribute.String("service.name", service), attribute.String("service.version", version)),
		resource.Environment(),
	)
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	ep := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
	if ep == "" {
		ep = os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT")
	}
	return &Provider{TracerProvider: tp, Endpoint: ep + " (" + protocol() + ")", shutdown: tp.Shutdown}, nil
}

// protocol is the OTLP protocol the environment asks for.
func protocol() string {
	p := os.Getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if p == "" {
		p = os.Getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if p == "" {
		p = "http/protobuf"
	}
	return p
}

func exporter(ctx context.Context) (*otlptrace.Exporter, error) {
	var (
		exp *otlptrace.Exporter
		err error
	)
	switch p := protocol(); p {
	case "http/protobuf":
		exp, err = otlptracehttp.New(ctx)
	case "grpc":
		exp, err = otlptracegrpc.New(ctx)
	default:
		return nil, fmt.Errorf("tracing: OTEL_EXPORTER_OTLP_PROTOCOL=%q: ghost speaks http/protobuf and grpc", p)
	}
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	return exp, nil
}
