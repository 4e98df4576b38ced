package main_test

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/postbox-go/postbox/postboxtest/logbuf"
	"github.com/postbox-go/postbox/postboxtest/receiver"
)

// collector is an OTLP/HTTP trace collector stub: it keeps the spans it
// receives, by trace id, with their service name.
type collector struct {
	mu    sync.Mutex
	spans []collected
}

type collected struct {
	traceID, name, service string
}

func newCollector(t *testing.T) (*collector, string) {
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &req)
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || err != nil {
			t.Errorf("collector: %s %s: %v", r.Method, r.URL.Path, err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			service := ""
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					service = kv.GetValue().GetStringValue()
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					c.spans = append(c.spans, collected{hex.EncodeToString(s.GetTraceId()), s.GetName(), service})
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL
}

func (c *collector) received() []collected {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]collected(nil), c.spans...)
}

// With OTEL_EXPORTER_OTLP_ENDPOINT set, "postbox relay" exports a publish
// span in the trace of a plain-SQL row's traceparent, flushed when it
// stops, and logs where it exports, never the exporter's headers.
func TestRelayExportsTraces(t *testing.T) {
	s, db := schemaStore(t)
	coll, collURL := newCollector(t)
	rcv := receiver.New(t, secret, nil)
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	var id string
	err := s.Pool().QueryRow(context.Background(), "insert into "+s.Table("outbox_events")+
		`(aggregate_type, aggregate_id, event_type, payload, headers) values ('order', '1', 'order.created', '{}', $1) returning id::text`,
		`{"traceparent": "00-`+traceID+`-00f067aa0ba902b7-01"}`).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logbuf.Buffer{}
	cmd := command(append([]string{"relay", "--webhook-url", rcv.URL, "--webhook-secret", secret}, db...)...)
	cmd.Env = append(cmd.Env, "OTEL_EXPORTER_OTLP_ENDPOINT="+collURL, "OTEL_EXPORTER_OTLP_HEADERS=authorization=Bearer%20collector-token")
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	rcv.WaitAccepted(t, 1, 10*time.Second)
	if got := rcv.Accepted()[0].Header.Get("Traceparent"); !strings.HasPrefix(got, "00-"+traceID+"-") {
		t.Errorf("request traceparent %q, want trace %s", got, traceID)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("relay: %v\n%s", err, logs)
	}
	spans := coll.received()
	if len(spans) != 1 || spans[0].traceID != traceID || !strings.HasPrefix(spans[0].name, "publish ") || spans[0].service != "postbox-relay" {
		t.Errorf("collector received %+v, want one publish span of trace %s from postbox-relay", spans, traceID)
	}
	log := logs.String()
	if !strings.Contains(log, "tracing on") || !strings.Contains(log, collURL+"/v1/traces") {
		t.Errorf("the log does not say where traces go:\n%s", log)
	}
	if strings.Contains(log, "collector-token") {
		t.Errorf("the exporter's headers appear in the log:\n%s", log)
	}
}

// Without the variables, or with OTEL_TRACES_EXPORTER=none, tracing is off
// and the log says so.
func TestRelayTracingOff(t *testing.T) {
	_, db := schemaStore(t)
	for _, env := range [][]string{nil, {"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:1", "OTEL_TRACES_EXPORTER=none"}} {
		logs := &logbuf.Buffer{}
		cmd := command(append([]string{"relay", "--webhook-url", "http://127.0.0.1:1/hook", "--webhook-secret", secret}, db...)...)
		cmd.Env = append(cmd.Env, env...)
		cmd.Stderr = logs
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the relay's first lines", 10*time.Second, func() bool { return strings.Contains(logs.String(), "tracing off") })
		_ = cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Errorf("relay with %v: %v\n%s", env, err, logs.String())
		}
	}
}
