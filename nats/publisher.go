// Package nats adapts NATS JetStream as a destination of the dispatcher:
// it publishes each job to a subject a stream covers, with the job id as
// the message id, and counts a job delivered only once the stream has
// acknowledged it.
package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"inbox/inbox"
)

// Headers of a published job, besides Nats-Msg-Id (the row id, unique
// across sources, so the stream never drops one source's job as another's
// duplicate).
const (
	HeaderEvent          = "Inbox-Event"     // the event name
	HeaderAttempt        = "Inbox-Attempt"   // the attempt number, from 1
	HeaderSource         = "Inbox-Source"    // the configured source the row came through
	HeaderKey            = "Inbox-Key"       // the provider's own key of the row
	HeaderRowID          = "Inbox-Row-Id"    // the row's id
	HeaderIdempotencyKey = "Idempotency-Key" // the provider's key, as over HTTP
)

// connectTimeout bounds the first connection.
const connectTimeout = 5 * time.Second

// Publisher publishes jobs to one subject of a JetStream stream.
type Publisher struct {
	nc      *natsgo.Conn
	js      jetstream.JetStream
	subject string
	stream  string
}

// Connect connects to the NATS server at url and checks that a JetStream
// stream covers subject. It fails when the server cannot be reached,
// subject is not a literal subject, JetStream is not enabled, or no stream
// covers subject, saying which. Credentials go in the URL
// (nats://user:password@host:4222).
func Connect(ctx context.Context, url, subject string) (*Publisher, error) {
	if subject == "" || strings.ContainsAny(subject, "*> \t\r\n") {
		return nil, fmt.Errorf("nats subject %q: want a literal subject such as sume.jobs.terminal (no wildcards or spaces)", subject)
	}
	nc, err := natsgo.Connect(url,
		natsgo.Name("inbox dispatch"),
		natsgo.Timeout(connectTimeout),
		// Once connected, keep trying to reconnect: publishes fail meanwhile
		// and are retried on the schedule.
		natsgo.MaxReconnects(-1),
	)
	if err != nil {
		return nil, fmt.Errorf("connect to nats: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	stream, err := js.StreamNameBySubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		nc.Close()
		return nil, fmt.Errorf("no JetStream stream covers subject %q: create one first, for example: nats stream add JOBS --subjects '%s' --dupe-window 2m", subject, subject)
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, natsgo.ErrNoResponders):
		nc.Close()
		return nil, fmt.Errorf("JetStream is not enabled on the nats server (start it with -js): %w", err)
	case err != nil:
		nc.Close()
		return nil, fmt.Errorf("find the stream for subject %q: %w", subject, err)
	}
	return &Publisher{nc: nc, js: js, subject: subject, stream: stream}, nil
}

// Stream returns the name of the stream that covers the subject.
func (p *Publisher) Stream() string { return p.stream }

// Publish publishes j with Nats-Msg-Id set to the job id and returns the
// stream's acknowledgement. When the stream already holds a message with
// that id inside its duplicate window, it drops this one and the ack says
// Duplicate; that is success too.
func (p *Publisher) Publish(ctx context.Context, j inbox.Job) (*jetstream.PubAck, error) {
	msg := natsgo.NewMsg(p.subject)
	msg.Data = j.Body
	source, key := j.Origin()
	msg.Header.Set(HeaderEvent, j.Event)
	msg.Header.Set(HeaderAttempt, strconv.Itoa(j.Attempt))
	msg.Header.Set(HeaderSource, source)
	msg.Header.Set(HeaderKey, key)
	msg.Header.Set(HeaderIdempotencyKey, key)
	msg.Header.Set(HeaderRowID, j.ID)
	ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(j.ID))
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", p.subject, err)
	}
	return ack, nil
}

// Deliver publishes j and returns once the stream has acknowledged it.
// Every failure is retried.
func (p *Publisher) Deliver(ctx context.Context, j inbox.Job) error {
	_, err := p.Publish(ctx, j)
	return err
}

// Close closes the connection.
func (p *Publisher) Close() { p.nc.Close() }
