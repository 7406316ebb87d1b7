package server_test

import (
	"bufio"
	"context"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp/server"
)

// keyRecorder is memService that records the keys its writes and reads
// are asked for.
type keyRecorder struct {
	memService
	mu   sync.Mutex
	keys []string
}

func (k *keyRecorder) record(s string) {
	k.mu.Lock()
	k.keys = append(k.keys, s)
	k.mu.Unlock()
}

func (k *keyRecorder) WriteBatch(ctx context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	for _, w := range ws {
		k.record(w.Counter + "\x00" + w.RequestID + "\x00" + w.Member)
	}
	return k.memService.WriteBatch(ctx, ws)
}

func (k *keyRecorder) ReadCounters(ctx context.Context, ids []string, c shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	for _, id := range ids {
		k.record(id + "\x00\x00")
	}
	return k.memService.ReadCounters(ctx, ids, c)
}

// FuzzKeysRESP is the RESP port's part of the proof that no two distinct
// texts become one key (http's FuzzKeys*): an argument that becomes a
// counter id (INCR, GET), a request id (SC.INCRBY ... REQUEST-ID) or a
// member (SADD) is taken byte for byte, and only when it is UTF-8, so an
// accepted key is exactly the argument, and two accepted arguments share a
// key only when they are the same bytes.
func FuzzKeysRESP(f *testing.F) {
	for _, s := range [][2]string{
		{"w-\xed\xa0\x80", "w-\xed\xaf\xbf"}, {"w-\xef\xbf\xbd", "w-\xff"}, {"a\r\nb", "ab"}, {"", "x"},
		{"😀", "\xf0\x9f\x98\x80"}, {"\xc0\x80", "\x00"},
	} {
		for field := range 4 {
			f.Add(uint8(field), []byte(s[0]), []byte(s[1]))
		}
	}
	rec := &keyRecorder{}
	s := server.New(rec, server.Options{Logger: slog.New(slog.DiscardHandler)})
	ln := newPipeListener()
	go s.Serve(ln)
	f.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	f.Fuzz(func(t *testing.T, field uint8, a, b []byte) {
		key := func(arg []byte) (string, bool) {
			var args []string
			switch field % 4 {
			case 0:
				args = []string{"INCR", string(arg)}
			case 1:
				args = []string{"SC.INCRBY", "k", "1", "REQUEST-ID", string(arg)}
			case 2:
				args = []string{"SADD", "set1", string(arg)}
			default:
				args = []string{"GET", string(arg)}
			}
			rec.mu.Lock()
			rec.keys = nil
			rec.mu.Unlock()
			conn := ln.dial()
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			var cmd strings.Builder
			cmd.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
			for _, x := range args {
				cmd.WriteString("$" + strconv.Itoa(len(x)) + "\r\n" + x + "\r\n")
			}
			cmd.WriteString("PING\r\n")
			go conn.Write([]byte(cmd.String()))
			br := bufio.NewReader(conn)
			for {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("%q: no reply: %v", args, err)
				}
				if line == "+PONG\r\n" {
					break
				}
			}
			rec.mu.Lock()
			defer rec.mu.Unlock()
			if len(rec.keys) == 0 {
				return "", false // refused before the service
			}
			parts := strings.Split(rec.keys[0], "\x00")
			switch field % 4 {
			case 1:
				return parts[1], true
			case 2:
				return parts[2], true
			}
			return parts[0], true
		}
		ka, oka := key(a)
		kb, okb := key(b)
		for _, c := range []struct {
			arg []byte
			key string
			ok  bool
		}{{a, ka, oka}, {b, kb, okb}} {
			if c.ok && (c.key != string(c.arg) || !utf8.Valid(c.arg)) {
				t.Fatalf("argument %q became the key %q (valid UTF-8: %v)", c.arg, c.key, utf8.Valid(c.arg))
			}
		}
		if oka && okb && ka == kb && string(a) != string(b) {
			t.Fatalf("%q and %q, two texts, became one key %q", a, b, ka)
		}
	})
}
