package config_test

import (
	"strings"
	"testing"

	"inbox/config"
)

// TestLoadBrokerDestinations reads a Redis stream and a BullMQ queue
// table, each its kind with its keys.
func TestLoadBrokerDestinations(t *testing.T) {
	p := writeConfig(t, `
[[destination]]
name = "stream"
redis_url = "redis://:pw@127.0.0.1:6379/2"
redis_stream = "jobs"
redis_maxlen = 100000

[[destination]]
name = "queue"
redis_url = "redis://127.0.0.1:6379"
bullmq_queue = "jobs"
bullmq_prefix = "app"
`)
	ds, err := config.LoadDestinations(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) != 2 {
		t.Fatalf("got %d destinations, want 2", len(ds))
	}
	if s := ds[0]; s.Kind() != "redis" || s.RedisStream != "jobs" || s.RedisMaxLen != 100000 || s.RedisURL != "redis://:pw@127.0.0.1:6379/2" {
		t.Errorf("stream = %+v", s)
	}
	if q := ds[1]; q.Kind() != "bullmq" || q.BullMQQueue != "jobs" || q.BullMQPrefix != "app" {
		t.Errorf("queue = %+v", q)
	}
}

// TestLoadBrokerDestinationsRefuses: each kind takes its own keys only,
// and the errors say which key goes with which, never the URL's password.
func TestLoadBrokerDestinationsRefuses(t *testing.T) {
	const url = `redis_url = "redis://:hunter2pw@127.0.0.1:6379"`
	for name, tt := range map[string]struct{ body, want string }{
		"redis_url alone":      {url, "redis_url goes with redis_stream or bullmq_queue"},
		"stream without url":   {`redis_stream = "jobs"`, "redis_stream and redis_url go together"},
		"queue without url":    {`bullmq_queue = "jobs"`, "bullmq_queue and redis_url go together"},
		"stream and queue":     {url + "\nredis_stream = \"a\"\nbullmq_queue = \"b\"", "set exactly one of url, exec, nats_url, redis_stream, bullmq_queue"},
		"maxlen with queue":    {url + "\nbullmq_queue = \"b\"\nredis_maxlen = 5", "redis_maxlen goes with redis_stream, not bullmq_queue"},
		"prefix with stream":   {url + "\nredis_stream = \"a\"\nbullmq_prefix = \"x\"", "bullmq_prefix goes with bullmq_queue, not redis_stream"},
		"redis_url with exec":  {url + "\nexec = \"true\"", "redis_url goes with redis_stream or bullmq_queue, not exec"},
		"secret with stream":   {url + "\nredis_stream = \"a\"\nsecret = \"whsec_c2VjcmV0\"", "set them with url only"},
		"negative maxlen":      {url + "\nredis_stream = \"a\"\nredis_maxlen = -1", "redis_maxlen must be 0 (no trim) or more"},
		"nats_subject alone":   {`nats_subject = "a.b"`, "nats_subject goes with nats_url"},
		"nats_url and exec":    {`nats_url = "nats://x"` + "\nnats_subject = \"a\"\nexec = \"true\"", "set exactly one of"},
		"redis_stream is exec": {url + "\nredis_stream = \"a\"\nnats_subject = \"b\"", "nats_subject goes with nats_url, not redis_stream"},
	} {
		t.Run(name, func(t *testing.T) {
			p := writeConfig(t, "[[destination]]\nname = \"a\"\n"+tt.body+"\n")
			_, err := config.LoadDestinations(p, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "hunter2pw") {
				t.Errorf("error %q holds the password", err)
			}
		})
	}
}
