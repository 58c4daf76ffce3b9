package data

import "errors"

// ErrBadRecord is wrapped by the error of an example that cannot be trained on whatever is retried:
// its stored bytes fail their checksum (a shard record's CRC-32C), do not decode, or declare more
// pixels than allowed. Failures to read a file at all are not bad records. A Loader with
// SkipBadRecords skips such examples instead of stopping.
var ErrBadRecord = errors.New("bad record")

// badRecordError marks err as a bad record; its message is err's.
type badRecordError struct{ err error }

func (e badRecordError) Error() string   { return e.err.Error() }
func (e badRecordError) Unwrap() []error { return []error{e.err, ErrBadRecord} }

// badRecord marks err (nil stays nil) as a bad record.
func badRecord(err error) error {
	if err == nil || errors.Is(err, ErrBadRecord) {
		return err
	}
	return badRecordError{err}
}
