// Package sqlscan scans the values both stores read from SQL into
// inbox's types: a NULL text as "", Unix milliseconds as a time in UTC.
// Each type is a Scan destination as database/sql and pgx take one (its
// Scan(src any) error method), so a store's list of columns can say how
// each column is read without a step after the scan.
package sqlscan

import (
	"fmt"
	"time"
)

// Text scans a text column into *P: NULL as "".
type Text[T ~string] struct{ P *T }

// Scan implements sql.Scanner.
func (t Text[T]) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*t.P = ""
	case string:
		*t.P = T(v)
	case []byte:
		*t.P = T(v)
	default:
		return fmt.Errorf("scan %T as text", src)
	}
	return nil
}

// Time scans Unix milliseconds into *P, in UTC. With Unset, NULL and 0
// are the zero time (a time not set, such as a row's done_at before it
// is done); without, NULL is refused and 0 is the Unix epoch.
type Time struct {
	P     *time.Time
	Unset bool
}

// Scan implements sql.Scanner.
func (t Time) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		if !t.Unset {
			return fmt.Errorf("scan NULL as a time")
		}
		*t.P = time.Time{}
	case int64:
		if t.Unset && v == 0 {
			*t.P = time.Time{}
			return nil
		}
		*t.P = time.UnixMilli(v).UTC()
	default:
		return fmt.Errorf("scan %T as a time", src)
	}
	return nil
}
