package process

import (
	"context"
	"errors"

	"inbox/amqp"
	"inbox/config"
)

// amqpAtStart looks the exchange up: a broker that answers it has no such
// exchange stops inbox dispatch; inside serve that is only logged and
// shown, since webhooks never wait on it. One that cannot be reached
// stops neither: the rows wait.
func amqpAtStart(ctx context.Context, l *liveDestinations, b broker, cfg config.Destination) error {
	switch err := b.(*amqp.Publisher).Check(ctx); {
	case err == nil:
		l.log.Info().Str("exchange", cfg.AMQPExchange).Str("routing_key", cfg.AMQPRoutingKey).Msg("publishing to RabbitMQ")
	case errors.Is(err, amqp.ErrUnreachable):
		// Logged by Connect; the rows wait for the connection.
	case l.alone:
		return err
	default:
		l.log.Error().Err(err).Msg("amqp: webhooks are still taken; dispatch is paused, their rows wait with no attempt counted, until the exchange exists")
	}
	return nil
}
