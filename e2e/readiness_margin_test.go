package e2e

import (
	"net/http"
	"os"
	"testing"
)

// TestReadyzDiskFullMargin fills the file system the database is on
// again and again, leaving a little room each time (less than a 60 KiB
// delivery takes with its row and index pages, some of it more than its
// body), until 60 KiB deliveries get 503: /readyz fails right after, and
// still after one more refused delivery, every time it is asked, though a
// probe of the refused size alone would fit, and a probe that found room
// once (where the write-ahead log starts over, or in the pages its last
// write freed) would let the next ones pass with their small row. Freed,
// the disk makes /readyz pass with no delivery, and takes deliveries.
func TestReadyzDiskFullMargin(t *testing.T) {
	dir, srv, deliver := serveOnTmpfs(t)
	for _, room := range []int64{0, 8 << 10, 16 << 10, 24 << 10, 32 << 10, 48 << 10, 64 << 10, 80 << 10, 96 << 10} {
		filler := fillLeaving(t, dir, room)
		refused := false
		for range 600 {
			if deliver() == http.StatusServiceUnavailable {
				refused = true
				break
			}
		}
		if !refused {
			t.Fatalf("room %d KiB: 60 KiB deliveries still stored on a full disk: the test proved nothing", room>>10)
		}
		var codes []int
		codes = append(codes, readyz(srv.admin))
		if got := deliver(); got != http.StatusServiceUnavailable {
			t.Fatalf("room %d KiB: the next delivery: %d, want 503", room>>10, got)
		}
		for range 3 {
			codes = append(codes, readyz(srv.admin))
		}
		for _, c := range codes {
			if c != http.StatusServiceUnavailable {
				t.Errorf("room %d KiB: /readyz after a refused delivery, then after one more: %v, want 503 each time", room>>10, codes)
				break
			}
		}
		// A replica marked not ready gets no delivery: freed, the disk
		// makes it ready again with none.
		must(t, os.Remove(filler))
		waitFor(t, "/readyz to pass again with no delivery", func() bool { return readyz(srv.admin) == http.StatusOK })
	}
	if got := deliver(); got != http.StatusNoContent {
		t.Fatalf("a delivery once /readyz passed again: %d, want 204", got)
	}
	if got := readyz(srv.admin); got != http.StatusOK {
		t.Errorf("/readyz after a stored delivery: %d, want 200", got)
	}
}
