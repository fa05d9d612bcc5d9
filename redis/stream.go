package redis

import (
	"context"
	"fmt"
	"strconv"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"inbox/inbox"
)

// The fields of a stream entry, in this order.
const (
	FieldRowID   = "row_id"  // the row's id, unique across sources
	FieldKey     = "key"     // the provider's own key of the row: the idempotency key
	FieldSource  = "source"  // the configured source the row came through
	FieldEvent   = "event"   // the event name
	FieldAttempt = "attempt" // the attempt number, from 1
	FieldBody    = "body"    // the body, its bytes exactly as received
)

// Stream appends each job to one Redis stream. It is a dispatch.Gate:
// while Redis cannot be reached the dispatcher pauses.
type Stream struct {
	*conn
	stream string
	maxLen int64
}

// OpenStream returns a Stream to the stream name of the Redis at rawURL,
// trimmed to about maxLen entries (0: never trimmed). It fails only on
// what no server could change: a URL go-redis cannot read, an empty name.
// A Redis that cannot be reached does not stop it (see dial).
func OpenStream(rawURL, name string, maxLen int64, log zerolog.Logger) (*Stream, error) {
	if err := CheckStream(rawURL, name, maxLen); err != nil {
		return nil, err
	}
	c, err := dial(rawURL, "stream "+name, log)
	if err != nil {
		return nil, err
	}
	return &Stream{conn: c, stream: name, maxLen: maxLen}, nil
}

// CheckStream returns what OpenStream would refuse, connecting to
// nothing.
func CheckStream(rawURL, name string, maxLen int64) error {
	if name == "" {
		return fmt.Errorf("redis stream: want a stream name")
	}
	if maxLen < 0 {
		return fmt.Errorf("redis stream %s: maxlen must be 0 (no trim) or more, got %d", name, maxLen)
	}
	_, err := Options(rawURL)
	return err
}

// Deliver appends j to the stream (XADD, with MAXLEN ~ when trimmed) and
// returns once Redis has answered with the entry's id. Each attempt is an
// entry of its own: a consumer keys its work on row_id (or source and
// key), as for any destination.
func (s *Stream) Deliver(ctx context.Context, j inbox.Job) error {
	source, key := j.Origin()
	args := &goredis.XAddArgs{Stream: s.stream, Values: []any{
		FieldRowID, j.ID, FieldKey, key, FieldSource, source, FieldEvent, j.Event,
		FieldAttempt, strconv.Itoa(j.Attempt), FieldBody, j.Body,
	}}
	if s.maxLen > 0 {
		args.MaxLen, args.Approx = s.maxLen, true
	}
	if err := s.rdb.XAdd(ctx, args).Err(); err != nil {
		return s.failed("xadd to stream "+s.stream, err)
	}
	return nil
}
