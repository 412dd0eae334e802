// Package ddb is Herald's DynamoDB adapter: notify.Store, written with github.com/guregu/dynamo/v2
// (and the raw SDK client it wraps where a request needs a field guregu does not expose: per-item
// ReturnValuesOnConditionCheckFailure, cancellation reasons), and RateLimiter, the
// notify.RateLimiter every Lambda of a deployment shares. They pass the conformance suites in
// internal/notify/storetest and internal/notify/ratelimittest against DynamoDB Local.
//
// # Tables
//
// Five tables, all PAY_PER_REQUEST; TableSpecs is the machine-readable form of this section (the
// CDK app mirrors it) and CreateTables creates them for tests and tooling. Times are stored as
// unix nanoseconds (N), TTL attributes as epoch seconds.
//
// notifications — pk (S), sk (S), TTL attribute ttl. Item types:
//
//	pk N#<id>             sk N              the notification: status, chunks_total, created_at,
//	                                        updated_at, rcpt_count, rcpt_ver, rcpt_starts, shards
//	                                        (counter shards in use, NS), doc (the rest as JSON,
//	                                        without recipients, status or stats), and ruser (the
//	                                        one user it was sent to, notify.IndexedUser, where the
//	                                        store keeps the recipient index: KeepRecipientIndex)
//	pk N#<id>             sk R#<ver>#<k>    recipient chunk k: up to 500 recipients, gzipped JSON,
//	                                        at most 300 KB (a 10,000-recipient notification is
//	                                        ~330 KB of JSON: too close to the 400 KB item limit to
//	                                        keep in the main item). rcpt_starts[k] is its offset.
//	pk K#<sha256(service,key)> sk K         idempotency key claim: notification_id
//	pk N#<id>#S#<00..15>  sk S              counter shard: total_<channel>, sent_<channel>,
//	                                        failed_<channel>, skipped_<channel>, chunks_prepared
//	pk N#<id>#C#<chunk>   sk C              prepared-chunk marker, ttl = 30 days
//	pk XV#<batch>         sk XV             the verdicts of an ingest invocation's express
//	                                        notifications (doc: id → verdicts, compact JSON),
//	                                        applied on every read of one still undecided in its
//	                                        own item (store_verdicts.go); no ttl
//	pk B#<id>             sk B              inbox broadcast claim (doc: notify.Broadcast as JSON),
//	                                        ttl from its ExpiresAt: PutBroadcast's idempotency
//	pk BA#<app>#<00..07>  sk <expiry>#<id>  a copy of the broadcast per target app and read shard;
//	                                        expiry first, so reads ask for sk > now only
//	pk AUDIT#<yyyy-mm>    sk <at 20d>#<id>  an audit log entry (notify.AuditEntry) of that month:
//	                                        id, at (unix ns), actor, actor_kind, action,
//	                                        target_type, target_id, params (map, sanitized),
//	                                        result, request_id; ttl = at + one year
//	pk AUDIT#ID#<id>      sk A              the entry's id claim: entry (its key), the same ttl
//	pk TPL#<service>#<name> sk V#<version, 10 digits>
//	                                        a template version (notify.TemplateStore): version,
//	                                        created_at, doc (the notify.Template as JSON); never
//	                                        changed once written
//	pk TPLS#<service>     sk <created_at>#<name>
//	                                        the service's listing entry of a template: name and
//	                                        latest version, keyed by that version's creation time
//	                                        so a descending Query lists the newest first
//	pk EXPORT#<id>        sk X              an export job: doc (notify.ExportJob as JSON, lease
//	                                        and file included), version (each write conditions
//	                                        on it), ttl = its retention's end + one day
//	pk EXPORT#LIST        sk <created_at 20d>#<id>
//	                                        the job's listing entry (ListExports: a descending
//	                                        Query, then a BatchGetItem of the jobs): id, the
//	                                        job's ttl; written with the job in one transaction,
//	                                        never changed
//
// GSI by_user: ruser (S) × created_at (N), KEYS_ONLY — the recipient view's search, newest first
// (ListNotifications with a user: a Query, then a BatchGetItem of the main items). Sparse: only a
// main item with ruser enters it, so campaigns, notifications to several users and every item
// of a store without the index cost it nothing; keys only, so status and counter writes never
// write it. A notification filed costs one write unit more.
//
// PutTemplateVersion reads the latest version consistently (a Query of the template's partition,
// newest first, limit 1) and writes the next one in one transaction with the listing entry's
// move: the version item is conditioned on attribute_not_exists, so of two concurrent puts one
// wins and the other reads again and takes the version after.
//
// deliveries — pk id (S), TTL attribute ttl (30 days after creation). One item per delivery with
// notification_id, nshard, sshard, user_id, channel, provider, app, address_masked, status,
// reason, detail, attempts, provider_message_id, lease_until, updated_at, rbatch (the realtime
// send batch that stored it with its outcome, RecordBatch; absent otherwise), and hist (its
// earlier attempts, notify.Delivery.History, as JSON; absent for one decided on its first
// attempt, so nearly every item is as small as before). There is no address
// attribute: the raw token, email or phone only travels in queue messages. GSI by_notification:
// nshard (S, "<notification id>#<00..15>", by hash of the delivery id) × id, KEYS_ONLY — sharded
// so a large campaign's inserts spread over 16 index partitions, keys only so claims and
// verdicts (which change no key) never write the index.
//
// users — pk (S), sk (S):
//
//	pk U#<user>   sk D#<token>   a device (platform, app, environment, locale, time zone)
//	pk T#<token>  sk T           the token's owner: user_id, updated_at
//	pk U#<user>   sk C           the contact, sealed whole with the notify.Cipher, and okeys
//	                             (the AddressKeys of its email and phone, SS)
//	pk CO#<key>   sk CO          the owner of a contact address (notify.AddressFinder): user_id;
//	                             PutContact writes the contact, these, and the removal of its
//	                             earlier ones still naming the user in one transaction
//	pk U#<user>   sk P           preferences: opt_out (map), marketing_consent_at,
//	                             night_consent_at (absent: no consent), updated_at
//	pk I#<object> sk <version>   an import marker (notify.ImportStore): one per version of an
//	                             uploaded list object ("<bucket>/<key>"; version "V#<version id>"
//	                             or "E#<etag>"): list_id, owner, lease_until (unix ms), done,
//	                             checkpoint (map), updated_at. ClaimImport is a consistent read
//	                             and a put conditioned on attribute_not_exists(pk) or on
//	                             lease_until < now AND done = false; the other writes are
//	                             UpdateItem conditioned on owner
//
// The lookup by token is the owner item rather than a GSI on token: a GSI is eventually
// consistent, and a token re-registered to another user a moment after logout must leave the
// first user at once, or that user's messages reach the new user's phone.
//
// suppressions — pk address_key (S, notify.AddressKey: a hash). channel, masked, reason,
// created_at; never the address. ListSuppressions (the suppressions export) is a Scan with the
// filter in its expression, at most scanPagesPerCall requests a call and resumed from the last
// key: no index is kept on every suppression for an operator's occasional file.
//
// inbox-items — pk user_id (S), sk (S), TTL attribute ttl (from ExpiresAt). An own item's sk is
// its ord, "<created_at as 20 digits>#<id>", so a Query of the table walks an inbox newest first
// (ListInbox) and an item is one write unit: there is no secondary index, because DynamoDB bills
// an item once more per index it enters (the inbox used to have two local indexes, newest and
// unread, and cost 3 units an item; docs/design.md §10). The price is paid on the rarer reads:
// UnreadCount and MarkAllRead read the user's unexpired items with a filter on read_at, and
// MarkRead and DeleteInboxItem find an item's sk by its id with a descending Query filtered on id
// (recent items in one small request). The id is unique per user only with its CreatedAt — the
// notification's, which every put of it carries. TTL deletion is lazy (up to days late), so
// every read filters on expires_at. Inboxes of the older table (name "inbox", keyed by id) are
// copied by CopyLegacyInbox (`herald inbox migrate`).
//
// Broadcasts (fan-out on read, docs/design.md §6): a campaign's inbox for an app's devices is one
// PutBroadcast — one transaction of the claim and 8 copies per target app, whatever the
// audience — and a user's marker of one (sk B#<broadcast id>: read_at, deleted, ttl; after every
// ord, so a Query of own items stops before the markers) is written only by MarkRead, MarkAllRead or
// DeleteInboxItem. Every inbox read merges the user's visible broadcasts: a Query of their
// devices, per app an eventually consistent Query of their shard (hash(user) mod 8) of the app's
// unexpired broadcasts, the preferences, and one BatchGetItem of their marker and any own item
// with each candidate's id — about 3 + 2·n RCU with n candidate broadcasts (broadcasts are few
// per app), 1 RCU for a user without devices. The 8 copies spread an app's inbox reads over 8
// partitions.
//
// rate limit table (RateLimiter, its own table: CreateRateLimitTable) — key (S), TTL attribute
// expires. One item per key and window, "<key>#<window size ns>#<window index>", counting the
// units taken in used; RateLimiter's doc explains the windows and what they cost.
//
// # Conditional and transactional writes
//
//   - CreateNotification: one TransactWriteItems of the main item (attribute_not_exists), the key
//     claim (attribute_not_exists) and the recipient chunks, so the notification appears whole
//     and two racing requests with one key cannot both win. The cancellation reasons say which
//     condition lost; the stored notification is read back and returned with created=false.
//     Recipients too big for one transaction (4 MB, 100 items) are written first with
//     BatchWriteItem under a fresh version that only the winning main item names; a loser
//     deletes its chunks (leftovers after a crash are unreachable garbage).
//   - Counters: every transition that changes Stats writes its delta with an ADD on a counter
//     shard in the same transaction, aggregated per transaction (one ADD per ≤ 98 deliveries).
//     The shard is the chunk's (chunk mod 16; a delivery keeps its chunk's shard in sshard, and
//     its verdicts count there): the chunks of a campaign, prepared and sent concurrently, spread
//     over 16 partitions instead of one hot item (1,000 WCU per partition) and rarely conflict,
//     while a notification of one chunk keeps one shard. The first transaction writing to a
//     shard also ADDs it to the main item's shards set (idempotent), so GetNotification reads
//     the main item and shard 0 and then only the other shards listed.
//   - CreateDeliveries: transactions of ≤ 98 conditional puts (attribute_not_exists) + 1 shard
//     ADD of exactly the deliveries in that transaction, then the chunk marker
//     (attribute_not_exists) with chunks_prepared+1 last. A ConditionalCheckFailed reason marks a
//     delivery that already exists (ALL_OLD returns its status for the pending list): it is taken
//     out and the transaction retried without it, so only what this call inserted is counted. A
//     crash midway leaves counted deliveries and no marker; the redelivered chunk adds the rest.
//     A marked chunk changes nothing.
//   - ClaimDeliveries: one UpdateItem per delivery, 16 at once, conditioned on its notification
//     and on status = PENDING or (SENDING and lease_until < now); ALL_NEW is the claimed
//     delivery, ALL_OLD on a failed condition tells a live lease (busy) from a terminal, unknown
//     or other notification's one atomically.
//   - CompleteDeliveries: a consistent BatchGetItem reads channel, status and shard (the channel
//     decides which counter moves), then transactions of ≤ 98 updates conditioned on status =
//     SENDING and the notification id + 1 shard ADD; lost conditions are dropped and the rest
//     retried. A SENDING verdict (accepted, verdict to come) sets the new lease_until and moves
//     no counter; every other verdict sets lease_until to 0.
//   - RecordBatch (a realtime batch claimed whole): a consistent read of the batch item (done:
//     nothing to do), one PutItem per delivery, 16 at once, conditioned on attribute_not_exists
//     or (the same notification and (status = PENDING or rbatch = this batch)) — one write unit
//     and one for its index entry, where CreateDeliveries, ClaimDeliveries and CompleteDeliveries
//     bill five — then the batch's done flag with one ADD of the outcomes whose puts succeeded,
//     in one transaction. A crash before that transaction leaves uncounted deliveries tagged
//     with the batch, which its re-run writes over and counts.
//   - SetNotificationStatus / SetChunksTotal: conditional UpdateItem (attribute_exists, status IN
//     from); ALL_OLD on failure tells ENOTFOUND from ECONFLICT.
//   - PutDevice: transaction of the device put and the owner item put conditioned on
//     attribute_not_exists or user_id = this user — one request for a new token or a refresh.
//     When another user owns the token, ALL_OLD names them and a second transaction moves it:
//     owner put conditioned on that user, plus the delete of their device item. DeleteDevice
//     and RemoveDeadDevice delete both items in one transaction, conditioned on the owner (and
//     updated_at <= seenBefore).
//   - Inbox writes: PutItem attribute_not_exists (a redelivered item leaves the stored one as it
//     is), MarkRead/MarkAllRead UpdateItem attribute_not_exists(read_at), DeleteInboxItem
//     attribute_exists; on a broadcast (no own item) they UpdateItem the user's marker instead,
//     conditioned on attribute_not_exists(deleted) (and attribute_not_exists(read_at) to read).
//     PutBroadcast is one TransactWriteItems of the claim (attribute_not_exists) and its copies.
//
// Transactions carry a fresh ClientRequestToken, so the SDK's retry of a request whose answer
// was lost cannot apply it twice. TransactionConflict and throttling reasons (and
// TransactionConflictException on single-item writes) are retried up to 12 times with jittered
// backoff. Batch reads and writes go through guregu/dynamo, which retries UnprocessedKeys and
// UnprocessedItems with exponential backoff until the context ends.
//
// # Reads and their cost
//
// GetNotification is one consistent BatchGetItem of the main item and shard 0 (2 RCU), plus one
// of the other registered shards for a notification of several chunks (up to 15 more RCU);
// GetRecipients a GetItem and a Query of the chunks a page overlaps. ListDevices is a consistent
// Query per user, 16 at once; GetContacts, GetPreferences and Suppressed are consistent
// BatchGetItems of 100 keys. ListDeliveries queries the 16 index shards for the next limit+1 ids
// each, merges them, and reads the page with a BatchGetItem; the index is eventually consistent,
// so a listing may lag a write by a moment. ListInbox pages the newest index with an opaque
// cursor (base64url of the last item's ord, from which the LastEvaluatedKey is rebuilt).
// UnreadCount is a Select COUNT Query of the sparse unread index: it reads every unread entry of
// the user (index entries are ~100 bytes, so ~40 per 0.5 RCU), cheap for a normal inbox and
// proportional to the backlog for one with thousands unread. ListInbox, UnreadCount and the
// inbox writes that fall through to a broadcast also read the user's visible broadcasts (see
// the inbox table above for what that costs).
//
// # Reserved sends
//
// A reserved notification's send_at lives in its doc; RescheduleNotification and FireScheduled
// rewrite it with one UpdateItem conditioned on status = SCHEDULED and the doc as read (read
// again if it changed), FireScheduled moving the status to ACCEPTED in the same write.
//
// Re-arming every schedule from the tables (after the schedule group was lost) needs the
// SCHEDULED notifications. ListScheduledNotifications finds them with a Scan filtered on sk = N
// and status = SCHEDULED rather than a sparse GSI on status, because:
//
//   - it is an operator's recovery step, run after a stack replacement, not a request path: a
//     GSI would be written on every reserved send and on every status change out of SCHEDULED
//     (each transition would have to REMOVE the sparse key), forever, to serve a read that
//     should almost never happen;
//   - a scan sees every SCHEDULED notification, including those written before the listing
//     existed, where a new index would need a backfill of the items it missed — and the table
//     being scanned is the truth, not an eventually consistent copy of it;
//   - no attribute has to be kept in step with the status by every writer.
//
// The price is that a listing reads the whole table once: about table size / 8 KB RCU
// (eventually consistent), e.g. ~130,000 RCU for 1 GB. Each call does at most 4 Scan requests
// (4 MB) and hands back a cursor, so an API call stays short however large the table is, and
// `herald schedules rearm` pages until the end. Reserved campaigns come from the campaign
// listing partition (pk CAMPAIGNS, filtered on state), then one BatchGetItem of those
// campaigns.
//
// The console's notification listing (ListNotifications, GET /v1/admin/notifications) is the
// same paged Scan, filtered on sk = N, the status, service, idempotency key and created_at the
// operator asked for (the category, in the doc, checked by the adapter), for the same reasons:
// an operator's occasional look, where a GSI per filter would be written on every notification
// and status change. Each call reads at most 4 MB and hands back a cursor; entries come in scan
// order, not by time, and the console sorts what it has.
//
// # Audit log
//
// The audit log of operator actions (notify.AuditLog) is kept in the notifications table rather
// than a table of its own: no new table, grant or alarm, and the admin function's role is given
// PutItem on keys starting AUDIT# only (dynamodb:LeadingKeys), not the whole table. Entries are
// partitioned by month of At and sorted by "<at>#<id>", so ListAudit is a consistent Query per
// month, newest month first and descending within it, bounded by the retention horizon (or
// from) and to (or the cursor, which is the last entry's sort key); at most 13 month queries
// reach back a year. The filters (actor, action, target type and id) are a filter expression,
// not an index: operator actions are a few a day, so a filtered listing reads at most a year of
// them (a few hundred KB) while a GSI per filter would be written on every append for reads that
// are rare, and would be eventually consistent. A month is one partition, which suits this
// volume far below a partition's 1,000 writes a second.
//
// AppendAudit is one TransactWriteItems of the id claim and the entry, both conditioned on
// attribute_not_exists: the entry's key holds its time, so the claim is what makes a retried
// append with the same id (even stamped with another time) write nothing. A ConditionalCheckFailed
// reason means "appended before" and is success. Nothing updates or deletes an audit item; the
// TTL (one year after At) removes it, and reads also leave out entries past the horizon, since
// TTL deletion can lag by days.
//
// # Errors
//
// Failures cross the port as *notify.Error: lost conditions are ECONFLICT (or the ENOTFOUND
// the contract names), throttling, ProvisionedThroughputExceeded, transaction conflicts, 5xx and
// transport errors EUNAVAILABLE, oversize items ETOOLARGE, other validation errors EINVALID,
// anything else EINTERNAL; each wrapped with the operation ("ddb: claim deliveries: …").
package ddb
