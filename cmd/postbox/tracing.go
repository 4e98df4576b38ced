package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Tracing of "postbox relay".
const (
	// tracingServiceDefault is the service.name of the relay's spans when
	// OTEL_SERVICE_NAME (or service.name in OTEL_RESOURCE_ATTRIBUTES) does
	// not name it.
	tracingServiceDefault = "postbox-relay"
	// tracingShutdownTimeout bounds the flush of the spans still buffered
	// when the relay stops.
	tracingShutdownTimeout = 5 * time.Second
	// tracerName names the relay's tracer (its instrumentation scope).
	tracerName = "github.com/postbox-go/postbox/relay"
)

// setupTracing starts exporting the relay's spans over OTLP/HTTP when the
// standard variables ask for it: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or
// OTEL_EXPORTER_OTLP_ENDPOINT set, and OTEL_TRACES_EXPORTER unset, "otlp"
// (or not "none"). The exporter itself reads the other OTEL_EXPORTER_OTLP_*
// variables (headers, timeout, compression, certificates) and the SDK
// OTEL_TRACES_SAMPLER; OTEL_SERVICE_NAME names the service (default
// "postbox-relay"). It logs whether tracing is on and where it exports,
// never the headers. Without those variables it returns a nil tracer: no
// span, no cost. shutdown flushes what is buffered, within
// tracingShutdownTimeout.
func setupTracing(ctx context.Context, getenv func(string) string, log *slog.Logger) (tracer trace.Tracer, shutdown func(), err error) {
	nothing := func() {}
	exporter := tracesExporter(getenv("OTEL_TRACES_EXPORTER"))
	endpoint, generic := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), false
	if endpoint == "" {
		endpoint, generic = getenv("OTEL_EXPORTER_OTLP_ENDPOINT"), true
	}
	switch {
	case exporter == "none":
		log.Info("tracing off (OTEL_TRACES_EXPORTER=none)")
		return nil, nothing, nil
	case exporter != "" && exporter != "otlp":
		return nil, nothing, fmt.Errorf("%w: OTEL_TRACES_EXPORTER=%q: postbox exports traces with otlp (or none)", errUsage, getenv("OTEL_TRACES_EXPORTER"))
	case endpoint == "":
		log.Info("tracing off (set OTEL_EXPORTER_OTLP_ENDPOINT to export traces)")
		return nil, nothing, nil
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(name); p != "" {
			if p != "http/protobuf" {
				return nil, nothing, fmt.Errorf("%w: %s=%q: postbox exports traces with http/protobuf", errUsage, name, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nothing, fmt.Errorf("tracing: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", tracingServiceDefault)),
		resource.WithFromEnv(), // OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES: they win
		resource.WithTelemetrySDK(),
	)
	if err != nil {
		return nil, nothing, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Warn("tracing: exporting spans failed", "error", err)
	}))
	service := tracingServiceDefault
	for _, kv := range res.Attributes() {
		if kv.Key == "service.name" {
			service = kv.Value.AsString()
		}
	}
	log.Info("tracing on: spans exported with OTLP/HTTP to "+showEndpoint(endpoint, generic), "service", service)
	return tp.Tracer(tracerName), func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), tracingShutdownTimeout)
		defer cancel()
		if err := tp.Shutdown(sctx); err != nil {
			log.Warn("tracing: flushing spans at shutdown failed", "error", err)
		}
	}, nil
}

// tracesExporter reads OTEL_TRACES_EXPORTER, a comma-separated list:
// "otlp" when it names otlp, "none" when it names none and nothing else,
// "" when empty, else the other exporter it names.
func tracesExporter(value string) string {
	other := ""
	for _, n := range strings.Split(value, ",") {
		switch n = strings.TrimSpace(n); n {
		case "otlp":
			return "otlp"
		case "":
		case "none":
			if other == "" {
				other = "none"
			}
		default:
			other = n
		}
	}
	return other
}

// showEndpoint is the exporter's URL for the log: without user info and
// query, which may hold credentials; a generic endpoint (of every signal)
// with the /v1/traces the exporter appends.
func showEndpoint(endpoint string, generic bool) string {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "(an endpoint that does not parse as a URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	if generic {
		u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
	}
	return u.String()
}
