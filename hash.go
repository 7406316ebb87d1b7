package shardcounter

import "strings"

// Hashes of counters.
//
// A hash, in Redis's sense (HINCRBY post:42 likes 1), is a name whose
// fields are counters. Each field is a counter of its own, sharded and
// group-committed like any other, whose id is the hash's name and the
// field joined by HashSeparator:
//
//	post:42 U+001F likes
//
// The separator is a control character, which ValidateName refuses in
// every name a user gives (counter ids, hash names, fields, members): no
// plain counter id contains it, and neither part of a field's id does. So
// the id of a field is never that of a plain counter, and it splits back
// into its hash and field exactly: HINCRBY a:b c, HINCRBY a b:c and INCR
// a:b:c are three different counters, "a:b"+sep+"c", "a"+sep+"b:c" and
// "a:b:c" (FuzzHashIDs checks this).
//
// The id of the hash's name followed by the separator alone, with no
// field, is the hash's marker: a counter of one shard that the RESP front
// end writes with the hash's first field, in the same commit (a write
// joined to the field's), so that whether a name holds a hash can be
// asked with one read of a known id (docs/RESP.md, "Types"). Its value
// means nothing, only its existence; a hash exists while it has a field.
//
// Stores need to know none of this: they check ids with ValidateID("counter
// id", id), which accepts the three forms, and list them in byte order,
// where a hash's marker and fields follow its name and one another.

// HashSeparator joins a hash's name and a field in the id of the counter
// that holds the field: U+001F, the unit separator.
const HashSeparator = "\x1f"

// MaxCounterIDLen bounds a counter id in bytes: a hash's name, the
// separator and a field, each part at most MaxIDLen.
const MaxCounterIDLen = 2*MaxIDLen + len(HashSeparator)

// HashFieldID returns the id of the counter that holds field of hash. Both
// must be names (ValidateName), the field not empty; HashFieldID does not
// check them.
func HashFieldID(hash, field string) string { return hash + HashSeparator + field }

// HashMarkerID returns the id of hash's marker.
func HashMarkerID(hash string) string { return hash + HashSeparator }

// HashFieldPrefix returns the prefix shared by the ids of hash's marker
// and fields, and by no other counter's id.
func HashFieldPrefix(hash string) string { return hash + HashSeparator }

// SplitHashID returns the hash and field of a field's id, with field ""
// for a hash's marker, and ok false for the id of a plain counter.
func SplitHashID(id string) (hash, field string, ok bool) {
	return strings.Cut(id, HashSeparator)
}

// AfterHash returns a listing position (ListOptions.After) past the
// marker and every field of hash: its prefix followed by the greatest
// field there can be, 64 times U+10FFFF (256 bytes of UTF-8). A listing
// after it resumes at the first id that sorts after the hash's own.
func AfterHash(hash string) string {
	return HashFieldPrefix(hash) + strings.Repeat("\U0010FFFF", MaxIDLen/4)
}

// ValidateCounterID checks a counter id, kind saying what it is in its
// error: a name (ValidateName), a hash field's id or a hash's marker. A
// prefix of counter ids passes it too.
func ValidateCounterID(kind, id string) error {
	if IsInternalID(id) {
		return validateInternalID(kind, id)
	}
	hash, field, ok := SplitHashID(id)
	if !ok {
		return ValidateName(kind, id)
	}
	if err := ValidateName("hash name in "+kind, hash); err != nil {
		return err
	}
	if field == "" {
		return nil // the hash's marker
	}
	return ValidateName("hash field in "+kind, field)
}
