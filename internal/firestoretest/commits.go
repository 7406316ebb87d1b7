package firestoretest

import (
	"context"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// CountCommits returns a client option that counts the commits a store's
// client sends that write (Firestore's or Datastore's Commit; the end of
// a read-only transaction is not one) and their sizes as sent, and the count so far with the largest size in bytes. Firestore's
// client, on the emulator, dials a connection of its own and ignores dial
// options: there the option is a connection to the emulator, dialled as
// that client dials it, with the counter on it.
func CountCommits() (option.ClientOption, func() (n, most int64), error) {
	var n, most atomic.Int64
	count := grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		if m, ok := req.(proto.Message); ok && strings.HasSuffix(method, "/Commit") && writes(m) {
			n.Add(1)
			size := int64(proto.Size(m))
			for m := most.Load(); size > m && !most.CompareAndSwap(m, size); m = most.Load() {
			}
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	})
	seen := func() (int64, int64) { return n.Load(), most.Load() }
	addr := os.Getenv("FIRESTORE_EMULATOR_HOST")
	if addr == "" {
		return option.WithGRPCDialOption(count), seen, nil
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(emulatorCreds{}), count)
	if err != nil {
		return nil, nil, err
	}
	return option.WithGRPCConn(conn), seen, nil
}

// emulatorCreds are the credentials Firestore's client sends the
// emulator: its owner, who may do anything.
type emulatorCreds struct{}

func (emulatorCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (emulatorCreds) RequireTransportSecurity() bool { return false }

// writes reports whether a commit request writes anything: Firestore's
// writes, Datastore's mutations.
func writes(m proto.Message) bool {
	r := m.ProtoReflect()
	for _, name := range []protoreflect.Name{"writes", "mutations"} {
		if fd := r.Descriptor().Fields().ByName(name); fd != nil && fd.IsList() && r.Get(fd).List().Len() > 0 {
			return true
		}
	}
	return false
}
