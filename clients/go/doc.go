// Package herald is the Go producer client of Herald: it sends notifications, and manages the
// devices, contacts, preferences, web push subscriptions, templates and campaigns they reach,
// the cheap and safe way.
//
// Two transports send: HTTPTransport (Herald's HTTP API — an API key locally, SigV4 behind API
// Gateway's IAM routes, a JWT for a user's own inbox) and SQSTransport (straight to the
// service's ingest queue, batched SendMessageBatch calls of up to 10 messages, the cheapest path).
// Both implement Sender; Client adds every other route over HTTP.
//
// Every send carries an idempotency key (required, or derived with DeriveKey from the caller's
// own), and a retried call sends the same body under the same key, so a retry can never send
// twice. Calls retry 429, 5xx and throttling with jittered backoff, honouring Retry-After, and
// stop when their context ends. Errors are *Error, carrying the API's code and field.
//
// The types follow internal/api/openapi.json of the Herald version beside them; a test fails
// when the two drift. This client speaks events/schema/send-request.v1.json (version 1).
package herald
