package firestoretest

import (
	"context"
	"errors"
	"math"
	"os"
	"path"
	"sync"
	"testing"
	"time"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
)

// Calls counts the RPCs a client sends, by method name (its last part:
// "BatchGetDocuments", "BeginTransaction", "Commit"...).
type Calls struct {
	mu sync.Mutex
	n  map[string]int
}

// Take returns the counts since the last Take and starts again from zero.
func (c *Calls) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *Calls) add(method string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[path.Base(method)]++
}

// CountCalls returns a client option that counts every RPC (unary or
// streaming) the clients given it send: a connection to the Firestore
// emulator, dialled as Firestore's client dials it (see CountCommits),
// which serves every client given it.
func CountCalls() (option.ClientOption, *Calls, error) {
	c := &Calls{}
	unary := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		c.add(method)
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	stream := grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		c.add(method)
		return streamer(ctx, desc, cc, method, opts...)
	})
	addr := os.Getenv("FIRESTORE_EMULATOR_HOST")
	if addr == "" {
		return nil, nil, errors.New("firestoretest: CountCalls needs FIRESTORE_EMULATOR_HOST (the Firestore emulator)")
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(emulatorCreds{}), unary, stream)
	if err != nil {
		return nil, nil, err
	}
	return option.WithGRPCConn(conn), c, nil
}

// FastReconnect returns a client option, for a test whose proxy cuts the
// connections to the emulator at addr: a connection dialled as
// Firestore's client dials the emulator, which serves every client given
// it, that dials again within 20–200 ms of a failed attempt. gRPC's
// default waits 1 s after the first failure and 1.6 times longer after
// each next, up to 2 minutes; a proxy that also cuts the reconnections
// (their first reply is a reply like any) then keeps the client away for
// seconds, as long as a test's whole load. The connection is closed at
// the end of the test.
func FastReconnect(tb testing.TB, addr string) option.ClientOption {
	tb.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(emulatorCreds{}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)),
		FastConnect)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return option.WithGRPCConn(conn)
}

// FastConnect is FastReconnect's dial option alone, for a store whose
// own dial options (Datastore's service config: its retry policy) must
// stay: a connection dialled with it dials again within 20–200 ms of a
// failed attempt.
var FastConnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
	MinConnectTimeout: 2 * time.Second,
})
