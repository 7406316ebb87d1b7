package bolt

import bbolt "go.etcd.io/bbolt"

// ExpireBatch is how many expired request ids a write deletes beyond those
// it records.
const ExpireBatch = expireBatch

// RequestIDs returns how many request ids the store keeps, and how many
// entries its index by time has, for tests of expiry.
func (s *CounterStore) RequestIDs() (ids, indexed int) {
	s.db.View(func(tx *bbolt.Tx) error {
		ids = tx.Bucket(bucketRequests).Stats().KeyN
		indexed = tx.Bucket(bucketByTime).Stats().KeyN
		return nil
	})
	return ids, indexed
}

// CorruptCounter overwrites the counter's record with bytes that do not
// decode.
func (s *CounterStore) CorruptCounter(id string) error {
	return s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketCounters).Put([]byte(id), []byte{0xff})
	})
}
