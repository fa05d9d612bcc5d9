package replicatest

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sync"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// The fake S3's bucket, and the only access key it accepts.
const (
	S3Bucket    = "inbox-replica"
	S3AccessKey = "AKIAINBOXTEST"
)

// FakeS3 is gofakes3 behind a handler that notes who signed each request
// and refuses any access key but S3AccessKey, as S3 would.
type FakeS3 struct {
	URL     string
	backend *s3mem.Backend

	mu       sync.Mutex
	keys     map[string]int // access key -> requests signed with it
	unsigned int
	tokens   map[string]int // X-Amz-Security-Token -> requests
}

var credentialKey = regexp.MustCompile(`Credential=([^/]+)/`)

// StartFakeS3 starts the stand-in with S3Bucket made; it stops when the
// test ends.
func StartFakeS3(t testing.TB) *FakeS3 {
	t.Helper()
	f := &FakeS3{backend: s3mem.New(), keys: map[string]int{}, tokens: map[string]int{}}
	if err := f.backend.CreateBucket(S3Bucket); err != nil {
		t.Fatal(err)
	}
	s3 := gofakes3.New(f.backend).Server()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m := credentialKey.FindStringSubmatch(r.Header.Get("Authorization"))
		f.mu.Lock()
		if m == nil {
			f.unsigned++
		} else {
			f.keys[m[1]]++
		}
		if tok := r.Header.Get("X-Amz-Security-Token"); tok != "" {
			f.tokens[tok]++
		}
		f.mu.Unlock()
		if m == nil || m[1] != S3AccessKey {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code><Message>The AWS Access Key Id you provided does not exist in our records.</Message></Error>`))
			return
		}
		s3.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

// Objects are the keys the bucket holds under prefix.
func (f *FakeS3) Objects(t testing.TB, prefix string) []string {
	t.Helper()
	list, err := f.backend.ListBucket(S3Bucket, &gofakes3.Prefix{Prefix: prefix, HasPrefix: true}, gofakes3.ListBucketPage{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, c := range list.Contents {
		keys = append(keys, c.Key)
	}
	return keys
}

// Signed is how many requests each access key signed, and how many came
// unsigned.
func (f *FakeS3) Signed() (keys map[string]int, unsigned int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.keys), f.unsigned
}

// Tokens is how many requests carried each session token.
func (f *FakeS3) Tokens() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.tokens)
}
