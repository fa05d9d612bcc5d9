package dispatch_test

import "inbox/inbox"

// keyed classifies body as a delivery of a KindKeyed source whose scheme
// named key and event.
func keyed(source, key, event string, body []byte, deliveryTS int64, r inbox.Rules) inbox.Delivery {
	r.Kind = inbox.KindKeyed
	return inbox.Classify(source, inbox.Named{Key: key, Event: event}, body, deliveryTS, r)
}
