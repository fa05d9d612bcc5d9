package replicaclient_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"inbox/replicaclient"
)

// sharedNATS is the JetStream server the project's machines run.
const sharedNATS = "127.0.0.1:4222"

// natsAddr is the address of a JetStream server: the machine's on
// 127.0.0.1:4222 when it answers, else the real server's code started
// in-process for the test, as nats/ does.
func natsAddr(t *testing.T) string {
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
	return startNATS(t, &server.Options{})
}

func startNATS(t *testing.T, o *server.Options) string {
	t.Helper()
	o.Host, o.Port = "127.0.0.1", server.RANDOM_PORT
	o.JetStream, o.StoreDir = true, filepath.Join(t.TempDir(), "js")
	o.NoLog, o.NoSigs = true, true
	s, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	return s.Addr().String()
}

// objectStore makes a bucket of its own for the test on addr and deletes
// it afterwards.
func objectStore(t *testing.T, addr string, opts ...natsgo.Option) (jetstream.ObjectStore, string) {
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

func natsEnv(t *testing.T, creds, token, user, password string) {
	t.Helper()
	t.Setenv(replicaclient.EnvNATSCreds, creds)
	t.Setenv(replicaclient.EnvNATSToken, token)
	t.Setenv(replicaclient.EnvNATSUser, user)
	t.Setenv(replicaclient.EnvNATSPassword, password)
}

func TestNATSRoundTrip(t *testing.T) {
	addr := natsAddr(t)
	store, bucket := objectStore(t, addr)
	natsEnv(t, "", "", "", "")
	client, err := replicaclient.New(context.Background(), "nats://"+addr+"/"+bucket+"/vm1")
	if err != nil {
		t.Fatal(err)
	}
	roundTrip(t, client)

	infos, err := store.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, info := range infos {
		names = append(names, info.Name)
		if !strings.HasPrefix(info.Name, "vm1/") {
			t.Errorf("object %q outside the URL's path vm1/", info.Name)
		}
	}
	if len(names) < 2 {
		t.Errorf("bucket holds %q, want the two syncs' LTX files", names)
	}
}

func TestNATSToken(t *testing.T) {
	const token = "t0ken-never-shown"
	addr := startNATS(t, &server.Options{Authorization: token})
	_, bucket := objectStore(t, addr, natsgo.Token(token))

	natsEnv(t, "", token, "", "")
	client, err := replicaclient.New(context.Background(), "nats://"+addr+"/"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := listLTX(client); err != nil {
		t.Fatalf("listing with INBOX_REPLICA_NATS_TOKEN: %v", err)
	}
	closeClient(t, client)

	const wrong = "wr0ng-t0ken-never-shown"
	natsEnv(t, "", wrong, "", "")
	client, err = replicaclient.New(context.Background(), "nats://"+addr+"/"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	err = listLTX(client)
	if err == nil {
		t.Fatal("listing with a wrong token succeeded")
	}
	if !strings.Contains(strings.ToLower(err.Error()), "authorization violation") {
		t.Errorf("error %q does not say the login was refused", err)
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), token) {
		t.Errorf("error %q holds the token", err)
	}
}

func TestNATSRefuses(t *testing.T) {
	const secret = "s3cr3t-p4ss"
	for _, tc := range []struct {
		name, url                    string
		creds, token, user, password string
		says                         []string
	}{
		{"credentials in URL", "nats://u:" + secret + "@127.0.0.1:4222/b", "", "", "", "", []string{replicaclient.EnvNATSCreds, replicaclient.EnvNATSToken}},
		{"token in URL", "nats://" + secret + "@127.0.0.1:4222/b", "", "", "", "", []string{"environment"}},
		{"no host", "nats:///b", "", "", "", "", []string{"no host", "nats://HOST"}},
		{"no bucket", "nats://127.0.0.1:4222", "", "", "", "", []string{"no object store bucket"}},
		{"bad bucket", "nats://127.0.0.1:4222/my.bucket", "", "", "", "", []string{`"my.bucket"`, "letters"}},
		{"unknown parameter", "nats://127.0.0.1:4222/b?token=" + secret, "", "", "", "", []string{`"token"`, "tls"}},
		{"tls word", "nats://127.0.0.1:4222/b?tls=yes", "", "", "", "", []string{"tls=true"}},
		{"half a login", "nats://127.0.0.1:4222/b", "", "", "inbox", "", []string{"set both"}},
		{"missing creds file", "nats://127.0.0.1:4222/b", "/nonexistent/inbox.creds", "", "", "", []string{replicaclient.EnvNATSCreds, "inbox.creds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			natsEnv(t, tc.creds, tc.token, tc.user, tc.password)
			_, err := replicaclient.New(context.Background(), tc.url)
			if err == nil {
				t.Fatalf("New(%q) succeeded, want an error", replicaclient.Redact(tc.url))
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q holds the secret", err)
			}
		})
	}
}
