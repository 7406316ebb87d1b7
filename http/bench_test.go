package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shardcounter/shardcounter"
	shttp "github.com/shardcounter/shardcounter/http"
)

// BenchmarkDecodeWrite decodes the body of an increment, as the server
// does for every write.
func BenchmarkDecodeWrite(b *testing.B) {
	for _, body := range []string{`{"by":1}`, `{"by":5,"request_id":"req-0c9f2a7e1b"}`, ``} {
		b.Run(body, func(b *testing.B) {
			data := []byte(body)
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := shttp.DecodeWrite(data, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncodeWriteResult encodes the reply to a write.
func BenchmarkEncodeWriteResult(b *testing.B) {
	res := shardcounter.WriteResult{Counter: "likes/post/8812", Applied: true}
	var buf bytes.Buffer
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		if err := json.NewEncoder(&buf).Encode(res); err != nil {
			b.Fatal(err)
		}
	}
}

// nopService answers every write at once: the server's own cost.
type nopService struct{ shardcounter.CounterService }

func (nopService) WriteCounter(_ context.Context, w shardcounter.Write) (*shardcounter.WriteResult, error) {
	return &shardcounter.WriteResult{Counter: w.Counter, Applied: true}, nil
}

// BenchmarkServeIncrement is one POST /v1/counters/{id}/increment through
// the server's handler, routing, decoding and reply included, over a
// service that does nothing.
func BenchmarkServeIncrement(b *testing.B) {
	srv := shttp.NewServer(nopService{}, shttp.ServerOptions{})
	body := []byte(`{"by":1}`)
	b.ReportAllocs()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodPost, "/v1/counters/likes/increment", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}
