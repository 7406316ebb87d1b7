package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shardcounter/shardcounter"
	"github.com/shardcounter/shardcounter/resp/server"
)

// FuzzServer sends arbitrary bytes to a server as one connection's input
// and checks that no input makes a command panic (the server would
// recover, log it and close only that connection; here it fails the
// test). The service answers at once from memory, so that the fuzzer
// spends its time in the server's parsing of frames, commands and
// arguments: it is not a store under test.
func FuzzServer(f *testing.F) {
	for _, s := range []string{
		"INCR k\r\nGET k\r\nMGET a missing b\r\n",
		"*3\r\n$6\r\nINCRBY\r\n$1\r\nk\r\n$2\r\n-5\r\n",
		"SADD s a b\r\nSREM s a\r\nSISMEMBER s a\r\nSCARD s\r\nSCARD missing\r\n",
		"SC.CREATE c SHARDS 4 KIND distinct MIN -1 MAX 9 WINDOW 1h:1d\r\nSC.INCRBY c 5 REQUEST-ID r\r\nSC.GET c CACHED\r\nSC.RESHARD c 8\r\nSC.SHARDS c\r\n",
		"HELLO 3 AUTH default tok SETNAME x\r\nCLIENT INFO\r\nCOMMAND\r\nCOMMAND INFO get nope\r\nCONFIG GET *\r\nINFO engine\r\nRESET\r\n",
		"AUTH tok\r\nDEL a b\r\nEXISTS a a\r\nSELECT 0\r\nECHO x\r\nPING\r\nQUIT\r\n",
		"MULTI\r\nINCR k\r\nGET k\r\nHINCRBY h f 2\r\nHGET h f\r\nMGET k missing\r\nEXISTS k\r\nEXEC\r\nEXEC\r\nDISCARD\r\n",
		"MULTI\r\nMULTI\r\nWATCH k\r\nNOPE\r\nDEL k\r\nEXEC\r\nWATCH k\r\nUNWATCH\r\n",
		"HINCRBY h f 1\r\nHMGET h f g\r\nHGETALL h\r\nHKEYS h\r\nHVALS h\r\nHLEN h\r\nHEXISTS h f\r\nHDEL h f g\r\nINCR h\r\n",
		"SCAN 0 MATCH a*[b-c]?\\x COUNT 3 TYPE hash\r\nSCAN 12 COUNT 0\r\nTYPE k\r\nTYPE missing\r\nDBSIZE\r\nFLUSHALL ASYNC\r\nFUNCTION FLUSH\r\nCOMMAND DOCS get hincrby\r\n",
		"SMEMBERS set\r\nSSCAN set 0 MATCH * COUNT 2\r\nSSCAN set 99\r\n",
		"EXPIRE k 10 NX\r\nPEXPIRE k 5 GT LT\r\nEXPIREAT k 9223372036854775807\r\nTTL k\r\nPTTL k\r\nEXPIRETIME k\r\nPERSIST k\r\n",
		"SET k 5 NX GET EX 10\r\nSET k 5 PX 0\r\nSET k x\r\nSET k 1 KEEPTTL EX 3\r\nGETSET k 2\r\nGETDEL k\r\nMULTI\r\nEXPIRE k 1\r\nINCR k\r\nEXEC\r\n",
		"*1\r\n$-1\r\n", "\"unbalanced\r\n",
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, in []byte, auth bool) {
		var panicked atomic.Value
		opts := server.Options{Logger: slog.New(errorCatcher{&panicked}), Engine: nil}
		if auth {
			opts.AuthTokens = []string{"tok"}
		}
		s := server.New(memService{}, opts)
		ln := newPipeListener()
		go s.Serve(ln)
		client := ln.dial()
		read := make(chan struct{})
		go func() {
			io.Copy(io.Discard, client)
			close(read)
		}()
		client.Write(in)
		client.Close()
		<-read
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if msg := panicked.Load(); msg != nil {
			t.Fatalf("input %q: %v", in, msg)
		}
	})
}

// errorCatcher is a slog handler that keeps the first error logged.
type errorCatcher struct{ first *atomic.Value }

func (h errorCatcher) Enabled(context.Context, slog.Level) bool { return true }
func (h errorCatcher) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h errorCatcher) WithGroup(string) slog.Handler            { return h }
func (h errorCatcher) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		var b strings.Builder
		b.WriteString(r.Message)
		r.Attrs(func(a slog.Attr) bool {
			b.WriteString(" " + a.String())
			return true
		})
		h.first.CompareAndSwap(nil, b.String())
	}
	return nil
}

// pipeListener is a net.Listener of in-memory connections.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) dial() net.Conn {
	c, s := net.Pipe()
	l.conns <- s
	return c
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	select {
	case <-l.closed:
	default:
		close(l.closed)
	}
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 6380} }

// memService answers every call of the server from nothing: counters
// whose id starts with "missing" do not exist, those starting with "set"
// are distinct, and every write applies.
type memService struct{ shardcounter.CounterService }

func memCounter(id string) (*shardcounter.Counter, error) {
	if strings.HasPrefix(id, "missing") || strings.Contains(id, shardcounter.HashSeparator) && !strings.HasPrefix(id, "h") {
		return nil, shardcounter.Errorf(shardcounter.ENOTFOUND, "no counter %q", id)
	}
	kind := shardcounter.KindSum
	if strings.HasPrefix(id, "set") {
		kind = shardcounter.KindDistinct
	}
	return &shardcounter.Counter{ID: id, Spec: shardcounter.Spec{Shards: 2, Kind: kind}}, nil
}

func memReading(id string, c shardcounter.Consistency) (*shardcounter.Reading, error) {
	if _, err := memCounter(id); err != nil {
		return nil, err
	}
	if c == "" {
		c = shardcounter.Strong
	}
	return &shardcounter.Reading{ID: id, Value: int64(len(id)), Shards: 2, Consistency: c}, nil
}

func (memService) CreateCounter(_ context.Context, id string, o shardcounter.CreateOptions) (*shardcounter.Counter, bool, error) {
	c, _ := memCounter(id)
	return c, !strings.HasPrefix(id, "taken"), nil
}
func (memService) GetCounter(_ context.Context, id string) (*shardcounter.Counter, error) {
	return memCounter(id)
}
func (memService) ReadCounter(_ context.Context, id string, c shardcounter.Consistency) (*shardcounter.Reading, error) {
	return memReading(id, c)
}
func (memService) ReadCounters(_ context.Context, ids []string, c shardcounter.Consistency) ([]shardcounter.ReadResult, error) {
	out := make([]shardcounter.ReadResult, len(ids))
	for i, id := range ids {
		out[i].Reading, out[i].Err = memReading(id, c)
	}
	return out, nil
}
func (memService) Placement(_ context.Context, id string) (*shardcounter.Placement, error) {
	if _, err := memCounter(id); err != nil {
		return nil, err
	}
	slot := 7
	return &shardcounter.Placement{ID: id, Shards: 2, Places: []shardcounter.ShardPlacement{{Shard: 0, Node: "a"}, {Shard: 1, Node: "b", Slot: &slot}}}, nil
}
func (memService) WriteBatch(_ context.Context, ws []shardcounter.Write) ([]shardcounter.WriteResult, error) {
	out := make([]shardcounter.WriteResult, len(ws))
	for i, w := range ws {
		if err := shardcounter.ValidateWrite(w); err != nil {
			return nil, err
		}
		v, changed := w.Delta, true
		out[i] = shardcounter.WriteResult{Counter: w.Counter, Applied: true, Value: &v, Changed: &changed, Duplicate: w.RequestID == "dup"}
		if strings.HasPrefix(w.Counter, "full") {
			out[i] = shardcounter.WriteResult{Counter: w.Counter, Error: shardcounter.Errorf(shardcounter.EOUTOFRANGE, "full")}
		}
	}
	return out, nil
}
func (memService) IsMember(_ context.Context, id, m string) (bool, error) {
	_, err := memCounter(id)
	return err == nil, err
}
func (memService) ReshardCounter(_ context.Context, id string, n int) (*shardcounter.Counter, error) {
	return memCounter(id)
}
func (memService) DeleteCounter(_ context.Context, id string) error {
	_, err := memCounter(id)
	return err
}
func (memService) ListCounters(_ context.Context, o shardcounter.ListOptions) (*shardcounter.CounterList, error) {
	var out []*shardcounter.Counter
	for _, id := range []string{"h", "h\x1f", "h\x1ff", "h\x1fg", "k", "set"} {
		if strings.HasPrefix(id, o.Prefix) && id > o.After && len(out) < max(o.Limit, 1) {
			c, _ := memCounter(id)
			out = append(out, c)
		}
	}
	list := &shardcounter.CounterList{Counters: out}
	if len(out) == max(o.Limit, 1) {
		list.Next = out[len(out)-1].ID
	}
	return list, nil
}
func (memService) ListMembers(_ context.Context, id string, o shardcounter.ListOptions) (*shardcounter.MemberList, error) {
	if _, err := memCounter(id); err != nil {
		return nil, err
	}
	return &shardcounter.MemberList{Members: []string{"a", "b"}}, nil
}
