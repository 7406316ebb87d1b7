package postgres

// SetExpireRescan sets how often expiry scans from the start of the
// index, for tests, and returns a func that restores it.
func SetExpireRescan(n int64) (restore func()) {
	old := expireRescan
	expireRescan = n
	return func() { expireRescan = old }
}
