package sume

import (
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// FuzzParseSignature checks the header parser on any input: it never
// panics, fails only with its two errors, and returns exactly the MACs of
// the well-formed sume-v1 entries.
func FuzzParseSignature(f *testing.F) {
	mac := hex.EncodeToString(Sign(testSecret, "1800000000", []byte(`{}`)))
	for _, s := range []string{
		"", ",", "sume-v1=" + mac, "sume-v1=" + mac + ",sume-v1=" + mac,
		" sume-v1=" + mac + " , v0=abc", "sume-v1=", "sume-v1=" + mac[:63], "sume-v1=" + strings.ToUpper(mac),
		"sume-v1=" + mac + "0", "SUME-V1=" + mac, "sume-v1==" + mac, "sume-v1=\x00" + mac[1:],
		"v1=" + mac, "sume-v1=" + mac + ",sume-v1=zz",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, header string) {
		macs, err := parseSignature(header)
		if err != nil {
			if !errors.Is(err, ErrNoSignature) && !errors.Is(err, ErrMalformedSignature) {
				t.Fatalf("error %v is not one of the parser's", err)
			}
			if macs != nil {
				t.Fatalf("MACs beside an error")
			}
			return
		}
		// The MACs, in order, are the entries that start with sume-v1=.
		var want []string
		for _, e := range strings.Split(header, ",") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(e), "sume-v1="); ok {
				want = append(want, v)
			}
		}
		if len(macs) == 0 || len(macs) != len(want) {
			t.Fatalf("%d MACs from %d sume-v1 entries", len(macs), len(want))
		}
		for i, m := range macs {
			if len(m) != 32 || hex.EncodeToString(m) != want[i] {
				t.Fatalf("MAC %d = %x from entry %q", i, m, want[i])
			}
		}
	})
}
