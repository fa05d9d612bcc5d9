package replicatest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"inbox/nats/natstest"
)

// sharedNATS is the JetStream server the project's machines run.
const sharedNATS = "127.0.0.1:4222"

// NATSAddr is the address of a JetStream server: the machine's on
// 127.0.0.1:4222 when it answers, else the real server's code started
// in-process for the test, as nats/ does.
func NATSAddr(t testing.TB) string {
	t.Helper()
	if nc, err := natsgo.Connect("nats://"+sharedNATS, natsgo.Timeout(2*time.Second)); err == nil {
		js, jerr := jetstream.New(nc)
		if jerr == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, jerr = js.AccountInfo(ctx)
			cancel()
		}
		nc.Close()
		if jerr == nil {
			return sharedNATS
		}
	}
	t.Logf("no JetStream on %s: starting nats-server in-process", sharedNATS)
	return StartNATS(t, &server.Options{})
}

// StartNATS starts nats-server with JetStream in-process, with o's
// settings, on a free loopback port; it stops when the test ends.
func StartNATS(t testing.TB, o *server.Options) string {
	t.Helper()
	o.Host, o.Port = "127.0.0.1", server.RANDOM_PORT
	o.JetStream, o.StoreDir = true, filepath.Join(t.TempDir(), "js")
	o.NoLog, o.NoSigs = true, true
	return natstest.Run(t, o).Addr().String()
}

// ObjectStore makes a bucket of its own for the test on addr and deletes
// it afterwards.
func ObjectStore(t testing.TB, addr string, opts ...natsgo.Option) (jetstream.ObjectStore, string) {
	t.Helper()
	nc, err := natsgo.Connect("nats://"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "inbox-replica-test-" + hex.EncodeToString(b[:])
	ctx := context.Background()
	store, err := js.CreateObjectStore(ctx, jetstream.ObjectStoreConfig{Bucket: name, Storage: jetstream.MemoryStorage})
	if err != nil {
		t.Fatalf("create object store %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := js.DeleteObjectStore(context.Background(), name); err != nil {
			t.Errorf("delete object store %s: %v", name, err)
		}
	})
	return store, name
}
