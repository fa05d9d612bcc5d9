package inbox

import "math/rand/v2"

// MaxProbeSize bounds the delivery a readiness probe stands for: the
// default hard cap on a request (serve's --max-request), so a probe never
// writes more than ProbeSize of one delivery could.
const MaxProbeSize = 4 << 20

// A probe that stands for a refused delivery writes more than its body:
// the delivery took room beyond its bytes (its row's pages, a page of each
// index it touched, the write-ahead log's frame around each page), and a
// probe of exactly its size fits where it did not. So the probe writes
// probeFactor times the body and probeSlack more.
const (
	probeFactor = 2
	probeSlack  = 64 << 10 // sixteen 4 KiB pages
)

// MaxProbeWrite bounds what a probe writes beyond its own row: the margin
// of ProbeSize over the largest delivery it stands for.
const MaxProbeWrite = probeFactor*MaxProbeSize + probeSlack

// ProbeSize is what a readiness probe writes for a failed commit whose
// largest delivery was size bytes (bounded by MaxProbeSize): not the
// exact size but a margin over it, so readiness returns only when a write
// as large as the refused delivery, with its row and index pages, would
// commit. 0 (no delivery) stays 0.
func ProbeSize(size int) int {
	if size <= 0 {
		return 0
	}
	return probeFactor*min(size, MaxProbeSize) + probeSlack
}

// ProbeRow is the row a store's Probe writes into events and undoes in
// the same transaction: a new row under key, as a delivery makes one, with
// a body of size bytes (at most MaxProbeWrite) that no compression shrinks,
// so it takes the room on disk a delivery of that size takes. key must be
// one no delivery makes, and unique to the store, so that two replicas'
// probes never wait for each other.
func ProbeRow(key string, size int) Delivery {
	body := make([]byte, min(max(size, 0), MaxProbeWrite))
	for i := 0; i+8 <= len(body); i += 8 {
		v := rand.Uint64()
		for j := range 8 {
			body[i+j] = byte(v >> (8 * j))
		}
	}
	return Delivery{Source: DefaultSource, Key: key, Status: StatusNew, Body: body, SHA256: "probe"}
}
