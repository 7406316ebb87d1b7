package firestoretest

import (
	"context"
	"errors"
	"os"
	"path"
	"sync"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
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
