package process

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"inbox/amqp"
	"inbox/config"
	"inbox/dispatch"
	"inbox/health"
	"inbox/inbox"
	"inbox/nats"
	"inbox/redis"
)

// broker is a destination on a message broker (NATS JetStream, a Redis
// stream, a BullMQ queue): connected in the background and never needed
// to start, a dispatch.Gate while it cannot take a job (the dispatcher
// pauses and spends no attempt), with a gauge of its connection and a
// /readyz line of its own. Its errors and State never hold a password.
type broker interface {
	dispatch.Destination
	dispatch.Gate
	// State says whether it can take jobs now and how its connection
	// stands, in a few words and no address, for /readyz.
	State(ctx context.Context) (bool, string)
	// Collector is the gauge of its connection (inbox_<kind>_connected).
	Collector() prometheus.Collector
	// Close ends its connection and whatever it runs in the background.
	Close()
}

// A brokerKind opens the brokers of one kind of destination (see
// config.Destination.Kind). Adding a broker is adding its kind here and
// in config's kinds: the dispatcher, the gate, the metrics, /readyz,
// /destinations, stats and the console come with it.
type brokerKind struct {
	// check returns what open would refuse of cfg, connecting nothing.
	check func(cfg config.Destination) error
	// open makes cfg's broker, connecting in the background; it fails
	// only on what no server could change.
	open func(cfg config.Destination, log zerolog.Logger) (broker, error)
	// atStart, when set, looks the broker made at start up within ctx,
	// and logs how it stands; an error stops inbox dispatch (alone), as a
	// broker that answers it can never take a job does.
	atStart func(ctx context.Context, l *liveDestinations, b broker, cfg config.Destination) error
}

// brokerKinds are the kinds of broker destinations, by kind name.
func brokerKinds() map[string]brokerKind {
	return map[string]brokerKind{
		"nats": {
			check: func(cfg config.Destination) error { return nats.CheckAddress(cfg.NATSURL, cfg.NATSSubject) },
			open: func(cfg config.Destination, log zerolog.Logger) (broker, error) {
				return nats.Connect(cfg.NATSURL, cfg.NATSSubject, log)
			},
			atStart: natsAtStart,
		},
		"amqp": {
			check: func(cfg config.Destination) error {
				return amqp.CheckAddress(cfg.AMQPURL, cfg.AMQPExchange, cfg.AMQPRoutingKey)
			},
			open: func(cfg config.Destination, log zerolog.Logger) (broker, error) {
				return amqp.Connect(cfg.AMQPURL, cfg.AMQPExchange, cfg.AMQPRoutingKey, log)
			},
			atStart: amqpAtStart,
		},
		"redis": {
			check: func(cfg config.Destination) error {
				return redis.CheckStream(cfg.RedisURL, cfg.RedisStream, cfg.RedisMaxLen)
			},
			open: func(cfg config.Destination, log zerolog.Logger) (broker, error) {
				return redis.OpenStream(cfg.RedisURL, cfg.RedisStream, cfg.RedisMaxLen, log)
			},
		},
		"bullmq": {
			check: func(cfg config.Destination) error {
				return redis.CheckQueue(cfg.RedisURL, cfg.BullMQPrefix, cfg.BullMQQueue)
			},
			open: func(cfg config.Destination, log zerolog.Logger) (broker, error) {
				return redis.OpenQueue(cfg.RedisURL, cfg.BullMQPrefix, cfg.BullMQQueue, log)
			},
		},
	}
}

// kindOf is cfg's broker kind; it fails for a kind no broker has.
func kindOf(cfg config.Destination) (brokerKind, error) {
	k, ok := brokerKinds()[cfg.Kind()]
	if !ok {
		return brokerKind{}, fmt.Errorf("destination %s: kind %q is not a broker this inbox knows", cfg.Name, cfg.Kind())
	}
	return k, nil
}

// broker is cfg's broker destination of kind k, connected in the
// background, its gauge registered, and what /readyz shows of its
// connection; at start (first) it is looked up as newDispatcher says. On
// error nothing is left made.
func (l *liveDestinations) broker(ctx context.Context, k brokerKind, cfg config.Destination, first bool) (dispatch.Destination, func(), []health.Dependency, error) {
	b, err := k.open(cfg, l.log)
	if err != nil {
		return nil, nil, nil, err
	}
	// /readyz's line for its connection: the kind ("nats"), with a
	// table's destination's name ("nats NAME"), whose gauge carries it.
	name, preg := cfg.Kind(), l.reg
	if cfg.Name != inbox.DefaultDestination {
		// Each named destination's gauge carries its name, as the
		// dispatch metrics do; the flags' one keeps its plain series.
		name += " " + cfg.Name
		preg = prometheus.WrapRegistererWith(prometheus.Labels{"destination": cfg.Name}, l.reg)
	}
	deps := []health.Dependency{{Name: name, State: b.State, Gates: l.alone}}
	gauge := b.Collector()
	if err := preg.Register(gauge); err != nil {
		b.Close()
		return nil, nil, nil, err
	}
	closeDest := func() {
		preg.Unregister(gauge) // a restart of the destination registers its own
		b.Close()
	}
	if !first || k.atStart == nil {
		return b, closeDest, deps, nil
	}
	cctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	if err := k.atStart(cctx, l, b, cfg); err != nil {
		closeDest()
		return nil, nil, nil, err
	}
	return b, closeDest, deps, nil
}
