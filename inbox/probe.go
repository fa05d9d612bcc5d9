package inbox

import "math/rand/v2"

// MaxProbeSize bounds what a readiness probe writes beyond its own row: the
// default hard cap on a request (serve's --max-request), so a probe never
// writes more than one delivery could.
const MaxProbeSize = 4 << 20

// ProbeRow is the row a store's Probe writes into events and undoes in
// the same transaction: a new row under key, as a delivery makes one, with
// a body of size bytes (at most MaxProbeSize) that no compression shrinks,
// so it takes the room on disk a delivery of that size takes. key must be
// one no delivery makes, and unique to the store, so that two replicas'
// probes never wait for each other.
func ProbeRow(key string, size int) Delivery {
	body := make([]byte, min(max(size, 0), MaxProbeSize))
	for i := 0; i+8 <= len(body); i += 8 {
		v := rand.Uint64()
		for j := range 8 {
			body[i+j] = byte(v >> (8 * j))
		}
	}
	return Delivery{Source: DefaultSource, Key: key, Status: StatusNew, Body: body, SHA256: "probe"}
}
