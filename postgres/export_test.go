package postgres

// SetExpireRescan sets how often expiry scans from the start of the
// index, for tests, and returns a func that restores it.
func SetExpireRescan(n int64) (restore func()) {
	old := expireRescan
	expireRescan = n
	return func() { expireRescan = old }
}

// SetTotalsSQL sets the statement that reads a batch's totals after its
// commit, for tests, and returns a func that restores it.
func SetTotalsSQL(q string) (restore func()) {
	old := totalsSQL
	totalsSQL = q
	return func() { totalsSQL = old }
}
