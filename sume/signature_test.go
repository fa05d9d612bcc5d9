package sume

import (
	"encoding/hex"
	"testing"
	"time"
)

const (
	testSecret  = "whsec_current_0123456789"
	otherSecret = "whsec_previous_9876543210"
)

var testNow = time.Unix(1_800_000_000, 0)

// TestVerifyMatchesOpenSSL pins the MAC to an independent computation:
// printf '1800000000.{"job_id":"job_1"}' | openssl dgst -sha256 -hmac secret
func TestVerifyMatchesOpenSSL(t *testing.T) {
	got := hex.EncodeToString(Sign("secret", "1800000000", []byte(`{"job_id":"job_1"}`)))
	want := "9c767ab5f5a579bc95560e6123a5ca2b3a3a9a714b69c5531e41150f635e265c"
	if got != want {
		t.Fatalf("Sign() = %s, want %s", got, want)
	}
}
