package config

import (
	"errors"
	"fmt"
	"strings"
)

// A kind is one kind of destination as a [[destination]] table describes
// it: the key that chooses it, the keys it cannot go without, and the
// keys it takes besides, which no other kind takes. A new kind of
// destination (a broker) is a line of kinds, its keys in
// Destination.keysSet and fileDestination, and its opener in the process's
// broker table.
type kind struct {
	name   string   // as Destination.Kind names it and /destinations shows it
	key    string   // the table key that chooses it
	needs  []string // keys it cannot go without
	extras []string // keys it takes besides
}

// kinds lists every kind of destination, in the order errors name them.
func kinds() []kind {
	return []kind{
		{name: "forward", key: "url", extras: []string{"secret", "secret_env"}},
		{name: "exec", key: "exec"},
		{name: "nats", key: "nats_url", needs: []string{"nats_subject"}},
		{name: "redis", key: "redis_stream", needs: []string{"redis_url"}, extras: []string{"redis_maxlen"}},
		{name: "bullmq", key: "bullmq_queue", needs: []string{"redis_url"}, extras: []string{"bullmq_prefix"}},
		{name: "amqp", key: "amqp_url", extras: []string{"amqp_exchange", "amqp_routing_key"}},
	}
}

// keysSet reports which of the keys that choose and tune a kind d sets,
// by their table keys.
func (d Destination) keysSet() map[string]bool {
	return map[string]bool{
		"url": d.URL != "", "secret": d.Secret != "", "secret_env": d.SecretEnv != "",
		"exec":     d.Exec != "",
		"nats_url": d.NATSURL != "", "nats_subject": d.NATSSubject != "",
		"redis_url": d.RedisURL != "", "redis_stream": d.RedisStream != "", "redis_maxlen": d.RedisMaxLen != 0,
		"bullmq_queue": d.BullMQQueue != "", "bullmq_prefix": d.BullMQPrefix != "",
		"amqp_url": d.AMQPURL != "", "amqp_exchange": d.AMQPExchange != "", "amqp_routing_key": d.AMQPRoutingKey != "",
	}
}

// BrokerURLs are the URLs of brokers d connects to, which may hold a
// password or a token: what a command run by an exec destination must
// never see, and what logs and errors show redacted.
func (d Destination) BrokerURLs() []string {
	var out []string
	for _, u := range []string{d.NATSURL, d.RedisURL, d.AMQPURL} {
		if u != "" {
			out = append(out, u)
		}
	}
	return out
}

// chosenKinds are the kinds d chooses, by their keys.
func (d Destination) chosenKinds() []kind {
	set := d.keysSet()
	var out []kind
	for _, k := range kinds() {
		if set[k.key] {
			out = append(out, k)
		}
	}
	return out
}

// Kind names the kind of destination d is: forward, exec, nats, redis,
// bullmq or amqp (see kinds); "" when it chooses none.
func (d Destination) Kind() string {
	if ks := d.chosenKinds(); len(ks) > 0 {
		return ks[0].name
	}
	return ""
}

// checkKind refuses a table that does not choose exactly one kind, one
// without a key its kind needs, and a key its kind does not take. The
// errors name the table's keys.
func (d Destination) checkKind() error {
	set := d.keysSet()
	all := kinds()
	chosen := d.chosenKinds()
	if len(chosen) != 1 {
		// A key that needs a kind, set alone, says which keys choose one.
		for _, k := range all {
			for _, n := range k.needs {
				if set[n] && len(chosen) == 0 {
					return fmt.Errorf("%s goes with %s", n, keysNeeding(all, n))
				}
			}
		}
		keys := make([]string, len(all))
		for i, k := range all {
			keys[i] = k.key
		}
		return fmt.Errorf("set exactly one of %s and %s", strings.Join(keys[:len(keys)-1], ", "), keys[len(keys)-1])
	}
	k := chosen[0]
	for _, n := range k.needs {
		if !set[n] {
			return fmt.Errorf("%s and %s go together", k.key, n)
		}
	}
	own := map[string]bool{k.key: true}
	for _, n := range append(append([]string(nil), k.needs...), k.extras...) {
		own[n] = true
	}
	for _, other := range all {
		for _, n := range append(append([]string(nil), other.needs...), other.extras...) {
			if set[n] && !own[n] {
				if other.name == "forward" {
					return errors.New("secret and secret_env sign what url posts: set them with url only")
				}
				return fmt.Errorf("%s goes with %s, not %s", n, keysNeeding(all, n), k.key)
			}
		}
	}
	return nil
}

// keysNeeding names the keys of the kinds that take key, "a or b".
func keysNeeding(all []kind, key string) string {
	var out []string
	for _, k := range all {
		for _, n := range append(append([]string(nil), k.needs...), k.extras...) {
			if n == key {
				out = append(out, k.key)
			}
		}
	}
	return strings.Join(out, " or ")
}
