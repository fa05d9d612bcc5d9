package process

import (
	"context"
	"errors"

	"inbox/config"
	"inbox/nats"
)

// headerRoom is what a NATS message's headers take beside its body, at
// most for a usual row: the warning at start allows for it.
const headerRoom = 1 << 10

// natsAtStart looks the stream up: a server that answers that no stream
// covers the subject (or that JetStream is off) stops inbox dispatch;
// inside serve that is only logged and shown, since webhooks never wait
// on it. One that cannot be reached stops neither: the rows wait.
func natsAtStart(ctx context.Context, l *liveDestinations, b broker, cfg config.Destination) error {
	p := b.(*nats.Publisher)
	switch cerr := p.Check(ctx); {
	case cerr == nil:
		l.log.Info().Str("stream", p.Stream()).Str("subject", cfg.NATSSubject).Msg("publishing to JetStream")
		l.warnSizes(ctx, p, cfg)
	case errors.Is(cerr, nats.ErrUnreachable):
		// Logged by Connect; the rows wait for the connection.
	case l.alone:
		return cerr
	default:
		l.log.Error().Err(cerr).Msg("nats: webhooks are still taken; dispatch is paused, their rows wait with no attempt counted, until a stream answers")
	}
	return nil
}

// warnSizes warns when the server's max_payload or the stream's
// max_msg_size is below the largest body the sources hand on.
func (l *liveDestinations) warnSizes(ctx context.Context, p *nats.Publisher, cfg config.Destination) {
	log, maxBody := l.log, l.maxBody
	if most := p.MaxPayload(); most > 0 && maxBody+headerRoom > most {
		log.Warn().Int64("max_payload", most).Int64("max_body", maxBody).Str("subject", cfg.NATSSubject).
			Msg("nats: the server's max_payload is below the largest body the sources take (--max-body, max_body) with its headers: a larger message can never be published, and its row is parked too_large_for_destination; raise max_payload on the server, or lower --max-body")
	}
	if most := p.MaxMsgSize(ctx); most > 0 && maxBody+headerRoom > most {
		log.Warn().Int64("max_msg_size", most).Int64("max_body", maxBody).Str("stream", p.Stream()).
			Msg("nats: the stream's max_msg_size is below the largest body the sources take (--max-body, max_body) with its headers: a larger message can never be stored, and its row is parked too_large_for_destination; raise the stream's max_msg_size, or lower --max-body")
	}
}
