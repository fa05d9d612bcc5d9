package config_test

import (
	"strings"
	"testing"

	"inbox/config"
)

// TestLoadAMQPDestination reads a RabbitMQ table: amqp_url chooses the
// kind, amqp_exchange and amqp_routing_key go with it alone, and its URL
// is a broker URL (kept from an exec command's environment).
func TestLoadAMQPDestination(t *testing.T) {
	p := writeConfig(t, `
[[destination]]
name = "rabbit"
amqp_url = "amqp://inbox:hunter2pw@127.0.0.1:5672/jobs"
amqp_exchange = "inbox"
amqp_routing_key = "sume.jobs"

[[destination]]
name = "direct"
amqp_url = "amqp://127.0.0.1"
amqp_routing_key = "jobs"
`)
	ds, err := config.LoadDestinations(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("got %d destinations, want 2", len(ds))
	}
	if d := ds[0]; d.Kind() != "amqp" || d.AMQPExchange != "inbox" || d.AMQPRoutingKey != "sume.jobs" ||
		strings.Join(d.BrokerURLs(), " ") != "amqp://inbox:hunter2pw@127.0.0.1:5672/jobs" {
		t.Errorf("rabbit = %+v", d)
	}
	if d := ds[1]; d.Kind() != "amqp" || d.AMQPExchange != "" || d.AMQPRoutingKey != "jobs" {
		t.Errorf("direct = %+v", d)
	}
	for name, tt := range map[string]struct{ body, want string }{
		"exchange alone":    {`amqp_exchange = "inbox"`, "set exactly one of url, exec, nats_url, redis_stream, bullmq_queue and amqp_url"},
		"routing key alone": {`amqp_routing_key = "k"`, "set exactly one of"},
		"with exec":         {"amqp_url = \"amqp://u:hunter2pw@h\"\nexec = \"true\"", "set exactly one of"},
		"key with nats":     {"nats_url = \"nats://h\"\nnats_subject = \"a\"\namqp_exchange = \"x\"", "amqp_exchange goes with amqp_url, not nats_url"},
		"secret with amqp":  {"amqp_url = \"amqp://u:hunter2pw@h\"\nsecret = \"whsec_c2VjcmV0\"", "set them with url only"},
	} {
		t.Run(name, func(t *testing.T) {
			p := writeConfig(t, "[[destination]]\nname = \"a\"\n"+tt.body+"\n")
			_, err := config.LoadDestinations(p, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "hunter2pw") {
				t.Fatalf("error %v, want %q and no password", err, tt.want)
			}
		})
	}
}
