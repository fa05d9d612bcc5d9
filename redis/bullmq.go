package redis

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	goredis "github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"inbox/inbox"
)

// DefaultPrefix is BullMQ's own default key prefix.
const DefaultPrefix = "bull"

// addJob is the script that adds one job to a BullMQ 5 queue, atomically,
// unless a job of that id is there already (see bullmq_add.lua).
//
//go:embed bullmq_add.lua
var addJobLua string

// Queue adds each job to a BullMQ queue (major version 5), the way
// BullMQ's Queue.add does, with the row id as the job id: a repeat
// hand-off of a row (a crash between the add and its record, a replay) is
// the same job, never a second one, for as long as BullMQ keeps the job.
// It is a dispatch.Gate: while Redis cannot be reached the dispatcher
// pauses.
type Queue struct {
	*conn
	prefix, queue string
	add           *goredis.Script
}

// OpenQueue returns a Queue to the BullMQ queue name under prefix ("":
// DefaultPrefix) on the Redis at rawURL. It fails only on what no server
// could change: a URL go-redis cannot read, a name or prefix that is
// empty or holds a colon, which BullMQ's keys cannot. A Redis that cannot
// be reached does not stop it (see dial).
func OpenQueue(rawURL, prefix, name string, log zerolog.Logger) (*Queue, error) {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := CheckQueue(rawURL, prefix, name); err != nil {
		return nil, err
	}
	c, err := dial(rawURL, "queue "+prefix+":"+name, log)
	if err != nil {
		return nil, err
	}
	return &Queue{conn: c, prefix: prefix, queue: name, add: goredis.NewScript(addJobLua)}, nil
}

// CheckQueue returns what OpenQueue would refuse, connecting to nothing.
func CheckQueue(rawURL, prefix, name string) error {
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if name == "" || strings.Contains(name, ":") || strings.Contains(prefix, ":") {
		return fmt.Errorf("bullmq queue %q with prefix %q: want a queue name and a prefix without colons, as BullMQ builds its keys from them", name, prefix)
	}
	_, err := Options(rawURL)
	return err
}

// JobID is the BullMQ job id of the row id: the row id itself, with "%"
// and ":" percent-encoded (BullMQ refuses a custom id with a colon), and
// its first character too when the id is an integer, which BullMQ refuses
// as a custom id ("Custom Id cannot be integers": its own ids are
// integers): row 123 is job %3123, row -7 is job %2D7. It is one to one:
// decodeURIComponent(job.id) is the row id again.
func JobID(rowID string) string {
	id := strings.NewReplacer("%", "%25", ":", "%3A").Replace(rowID)
	if integer(id) {
		id = fmt.Sprintf("%%%02X", id[0]) + id[1:]
	}
	return id
}

// integer reports whether s is an integer as BullMQ tells one, and more:
// an optional minus and digits only. BullMQ refuses an id equal to its
// parseInt; every such id is of this form.
func integer(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// Data is a job's data, as the worker's job.data has it. Body is the body
// as received when it is UTF-8 text (JSON always is); a body that is not
// is in BodyBase64 instead, so the bytes are exact either way.
type Data struct {
	RowID      string `json:"row_id"`
	Key        string `json:"key"`
	Source     string `json:"source"`
	Event      string `json:"event"`
	Attempt    int    `json:"attempt"`
	Body       string `json:"body"`
	BodyBase64 []byte `json:"body_base64,omitempty"`
}

// jobOpts are the options a job is stored with, as Queue.add stores a job
// with a custom id and BullMQ's defaults.
type jobOpts struct {
	JobID    string `json:"jobId"`
	Attempts int    `json:"attempts"`
}

// Deliver adds j to the queue as a job named for its event, its data a
// Data, its id JobID(j.ID), and returns once Redis has run the add: the
// job is in the queue's wait list (or its paused list), or was there
// already, in whatever state, and is left as it is.
func (q *Queue) Deliver(ctx context.Context, j inbox.Job) error {
	data, err := jobData(j)
	if err != nil {
		return err
	}
	id := JobID(j.ID)
	opts, err := json.Marshal(jobOpts{JobID: id})
	if err != nil {
		return err
	}
	name := j.Event
	if name == "" {
		name = "job"
	}
	base := q.prefix + ":" + q.queue + ":"
	keys := []string{base + "wait", base + "paused", base + "meta", base + "id", base + "events", base + "marker", base + "active", base + id}
	if err := q.add.Run(ctx, q.rdb, keys, id, name, data, opts, strconv.FormatInt(time.Now().UnixMilli(), 10)).Err(); err != nil {
		return q.failed("add job to bullmq queue "+q.prefix+":"+q.queue, err)
	}
	return nil
}

// jobData is j's Data as JSON.
func jobData(j inbox.Job) ([]byte, error) {
	source, key := j.Origin()
	d := Data{RowID: j.ID, Key: key, Source: source, Event: j.Event, Attempt: j.Attempt}
	if utf8.Valid(j.Body) {
		d.Body = string(j.Body)
	} else {
		d.BodyBase64 = j.Body
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(d); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
