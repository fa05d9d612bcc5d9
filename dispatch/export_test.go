package dispatch

// HeldPerWorker is heldPerWorker, for the tests.
const HeldPerWorker = heldPerWorker

// RetryAfter is retryAfter, for the tests.
var RetryAfter = retryAfter
