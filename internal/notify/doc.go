// Package notify is Herald's domain: notifications, recipients, devices, contacts, preferences,
// deliveries and inbox items, the error codes that decide retry versus drop, and the ports
// (Store, Queue, Sender, RateLimiter, Clock) that the stages in internal/pipeline are written
// against. It imports no SDK; adapters import it, never the reverse.
package notify
