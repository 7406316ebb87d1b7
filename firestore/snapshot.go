package firestore

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"time"

	vkit "cloud.google.com/go/firestore/apiv1"
	pb "cloud.google.com/go/firestore/apiv1/firestorepb"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/shardcounter/shardcounter/internal/docstore"
)

// doc is a document as a strong read returns it: the fields in the
// types Google's client gives DocumentSnapshot.Data (int64, string,
// bool, float64, time.Time, []byte, map[string]any, []any).
type doc struct {
	path             string
	exists           bool
	fields           map[string]any
	created, updated time.Time
	read             time.Time // the transaction's read time, the snapshot's
}

// newRawClient opens the low-level client a strong read needs: Google's
// client commits every transaction, a read-only one too. On the emulator
// it dials it the way that client does (plain text, as its owner);
// extra (tests' connections) comes last, so it wins. The connection it
// dials is returned for Close (nil for none): one extra replaces is not
// the client's to close.
func newRawClient(ctx context.Context, extra []option.ClientOption) (*vkit.Client, *grpc.ClientConn, error) {
	o := []option.ClientOption{option.WithGRPCDialOption(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))}
	var conn *grpc.ClientConn
	if addr := os.Getenv("FIRESTORE_EMULATOR_HOST"); addr != "" {
		addr = strings.TrimPrefix(strings.TrimPrefix(addr, "http://"), "https://")
		var err error
		conn, err = grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithPerRPCCredentials(emulatorOwner{}), grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(math.MaxInt32)))
		if err != nil {
			return nil, nil, err
		}
		o = []option.ClientOption{option.WithGRPCConn(conn)}
	}
	c, err := vkit.NewClient(ctx, append(o, extra...)...)
	if err != nil && conn != nil {
		conn.Close()
	}
	return c, conn, err
}

// emulatorOwner is what Google's client sends the emulator: its owner,
// who may do anything.
type emulatorOwner struct{}

func (emulatorOwner) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer owner"}, nil
}

func (emulatorOwner) RequireTransportSecurity() bool { return false }

// getSnapshot reads the documents (full paths) as of one moment
// (getSnapshotOnce); on the emulator (lockedReads) again, with backoff,
// when the emulator aborts its transaction for a writer.
func (s *CounterStore) getSnapshot(ctx context.Context, paths []string) (docs []doc, err error) {
	_, err = docstore.RetryConflicts(ctx, func(err error) bool { return s.lockedReads && status.Code(err) == codes.Aborted },
		func() (err error) { docs, err = s.getSnapshotOnce(ctx, paths); return err })
	return docs, err
}

// getSnapshotOnce reads the documents in a read-only transaction: two
// round trips, BeginTransaction and one BatchGetDocuments in it. A batch
// get outside a transaction is not one snapshot (the emulator answered
// one with part of a commit, a counter bounded to [0, 8] read as -1). Nor,
// on the emulator, is one that begins its own read-only transaction
// (new_transaction), which the API offers to save the begin:
// storetest.RunSnapshotReads saw torn reads that way in half its runs. A
// read time would save nothing: one taken from the store's clock may
// precede a write acknowledged before the read (the read would not be
// linearizable), and the server gives its times only in answer to a
// call. The transaction is neither committed nor rolled back (Google's
// client commits it, a third round trip): a read-only transaction takes
// no locks, and the server drops it when it expires. When the stream
// breaks, the documents not sent yet are asked for again in the same
// transaction, as of the same moment.
//
// On the emulator (lockedReads) the emulator's read-only transactions
// are no snapshot either: a batch get in one sees the documents of a
// commit that the emulator has written so far and not the rest. There
// the transaction is read-write, whose batch get waits for the commits
// that hold the documents, and is rolled back after it (three round
// trips), under a context that outlives ctx by rollbackGrace, in which
// Google's client sends the rollback again through a broken connection:
// the emulator keeps a read-write transaction never rolled back, and its
// locks, about a minute, whether its connection is open or gone, and a
// commit that writes a document it read waits 2 s for the lock and is
// then aborted, again and again until then.
func (s *CounterStore) getSnapshotOnce(ctx context.Context, paths []string) ([]doc, error) {
	ctx = metadata.AppendToOutgoingContext(ctx, "google-cloud-resource-prefix", s.dbPath)
	opts := &pb.TransactionOptions{Mode: &pb.TransactionOptions_ReadOnly_{ReadOnly: &pb.TransactionOptions_ReadOnly{}}}
	if s.lockedReads {
		opts = &pb.TransactionOptions{Mode: &pb.TransactionOptions_ReadWrite_{ReadWrite: &pb.TransactionOptions_ReadWrite{}}}
	}
	tx, err := s.raw.BeginTransaction(ctx, &pb.BeginTransactionRequest{Database: s.dbPath, Options: opts})
	if err != nil {
		return nil, err
	}
	if s.lockedReads {
		defer func() {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackGrace)
			defer cancel()
			s.raw.Rollback(rctx, &pb.RollbackRequest{Database: s.dbPath, Transaction: tx.Transaction}) //nolint:errcheck // it wrote nothing: the rollback frees its locks
		}()
	}
	docs := make([]doc, len(paths))
	at := make(map[string][]int, len(paths))
	for i, p := range paths {
		at[p] = append(at[p], i)
	}
	left := len(at)
	for attempt := 0; ; attempt++ {
		req := &pb.BatchGetDocumentsRequest{Database: s.dbPath, ConsistencySelector: &pb.BatchGetDocumentsRequest_Transaction{Transaction: tx.Transaction}}
		for p, is := range at {
			if docs[is[0]].path == "" {
				req.Documents = append(req.Documents, p)
			}
		}
		err := s.batchGet(ctx, req, func(d doc) error {
			is, ok := at[d.path]
			if !ok || docs[is[0]].path != "" {
				return fmt.Errorf("firestore: batch get sent %q, not asked for or twice", d.path)
			}
			for _, i := range is {
				docs[i] = d
			}
			left--
			return nil
		})
		if err == nil && left > 0 {
			err = fmt.Errorf("firestore: batch get ended with %d documents not sent", left)
		}
		if err == nil || attempt == 4 || !retryable(err) || ctx.Err() != nil {
			return docs, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(100<<attempt) * time.Millisecond):
		}
	}
}

// rollbackGrace is how long a locked read's rollback may take.
const rollbackGrace = 5 * time.Second

// batchGet sends one batch get and passes each document it returns to f.
func (s *CounterStore) batchGet(ctx context.Context, req *pb.BatchGetDocumentsRequest, f func(doc) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the stream when f fails
	stream, err := s.raw.BatchGetDocuments(ctx, req)
	if err != nil {
		return err
	}
	for {
		res, err := stream.Recv()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		d := doc{read: res.GetReadTime().AsTime()}
		switch r := res.Result.(type) {
		case *pb.BatchGetDocumentsResponse_Found:
			d.path, d.exists, d.fields = r.Found.Name, true, fromProto(r.Found.Fields)
			d.created, d.updated = r.Found.GetCreateTime().AsTime(), r.Found.GetUpdateTime().AsTime()
		case *pb.BatchGetDocumentsResponse_Missing:
			d.path = r.Missing
		default:
			return fmt.Errorf("firestore: batch get sent a response with no document (%T)", r)
		}
		if err := f(d); err != nil {
			return err
		}
	}
}

// retryable reports whether a batch get may be sent again: the errors
// of a broken stream.
func retryable(err error) bool {
	switch status.Code(err) {
	case codes.Unavailable, codes.Internal, codes.DeadlineExceeded:
		return true
	}
	return false
}

// fromProto converts fields to the types Google's client gives them; a
// reference is left as its path, a geo point as its proto: the store
// writes neither.
func fromProto(fields map[string]*pb.Value) map[string]any {
	m := make(map[string]any, len(fields))
	for k, v := range fields {
		m[k] = valueOf(v)
	}
	return m
}

func valueOf(v *pb.Value) any {
	switch v := v.GetValueType().(type) {
	case *pb.Value_BooleanValue:
		return v.BooleanValue
	case *pb.Value_IntegerValue:
		return v.IntegerValue
	case *pb.Value_DoubleValue:
		return v.DoubleValue
	case *pb.Value_TimestampValue:
		return v.TimestampValue.AsTime()
	case *pb.Value_StringValue:
		return v.StringValue
	case *pb.Value_BytesValue:
		return v.BytesValue
	case *pb.Value_ReferenceValue:
		return v.ReferenceValue
	case *pb.Value_GeoPointValue:
		return v.GeoPointValue
	case *pb.Value_ArrayValue:
		a := make([]any, len(v.ArrayValue.GetValues()))
		for i, e := range v.ArrayValue.GetValues() {
			a[i] = valueOf(e)
		}
		return a
	case *pb.Value_MapValue:
		return fromProto(v.MapValue.GetFields())
	}
	return nil // null
}
