package dispatch

// HeldPerWorker is heldPerWorker, for the tests.
const HeldPerWorker = heldPerWorker
