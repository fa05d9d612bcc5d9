package postgres_test

import (
	"context"
	"net"
	"net/url"
	"testing"
	"time"

	"inbox/postgres"
)

// TestUnreachable sorts Open's failures against the real server into an
// outage to wait out and a configuration to fix.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	dsn := testURL(t)
	// A port that refuses, and a listener that takes connections and never
	// answers (a database that hangs).
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refusing := closed.Addr().String()
	closed.Close()
	hung, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer hung.Close()
	at := func(host string) string {
		u, _ := url.Parse(dsn)
		u.Host = host
		return u.String()
	}
	edit := func(f func(u *url.URL)) string {
		u, _ := url.Parse(dsn)
		f(u)
		return u.String()
	}
	for _, tt := range []struct {
		name        string
		url         string
		unreachable bool
	}{
		{"connection refused", at(refusing), true},
		{"hung", at(hung.Addr().String()), true},
		{"no such host", at("no-such-host.invalid:5432"), true},
		{"unparsable", "postgres://u@127.0.0.1:notaport/x", false},
		{"no such database", edit(func(u *url.URL) { u.Path = "/no_such_database_unreachable" }), false},
		{"no such role", edit(func(u *url.URL) { u.User = url.User("no_such_role_unreachable") }), false},
		{"synchronous_commit off", withParam(dsn, "synchronous_commit", "off"), false},
	} {
		s, err := postgres.Open(context.Background(), tt.url, postgres.Options{BusyTimeout: 300 * time.Millisecond})
		if err == nil {
			s.Close()
			t.Errorf("%s: Open succeeded", tt.name)
			continue
		}
		if got := postgres.Unreachable(err); got != tt.unreachable {
			t.Errorf("%s: Unreachable(%v) = %v, want %v", tt.name, err, got, tt.unreachable)
		}
	}
	if postgres.Unreachable(nil) {
		t.Error("Unreachable(nil) = true")
	}
}
