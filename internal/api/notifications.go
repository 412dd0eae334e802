package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"herald/internal/notify"
)

const (
	defaultDeliveryPage = 100
	maxDeliveryPage     = 1000
)

// acceptedResponse answers POST /v1/notifications.
type acceptedResponse struct {
	ID     string                    `json:"id"`
	Status notify.NotificationStatus `json:"status"`
}

// createNotification validates a SendRequest and hands it to the service's ingest queue; ingest
// stores it. The id is returned before it is stored, so a status lookup right after may 404.
func (s *server) createNotification(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var req notify.SendRequest
	if err := s.decodeSendAt(w, r, &req); err != nil {
		return err
	}
	p, err := s.prepareSend(r, &req)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/notifications/"+url.PathEscape(p.accepted.ID))
	if p.stored {
		writeJSON(w, http.StatusOK, p.accepted)
		return nil
	}
	won, err := s.claimKey(ctx, p)
	if err != nil {
		return err
	}
	p.attrs[notify.AttrLane] = string(p.lane)
	msg := notify.OutMessage{Body: p.body, GroupID: p.service, Attributes: p.attrs}
	if err := s.enqueue(ctx, p.service, msg, fmt.Sprintf("the notification is %d bytes as JSON, over the queue's message size limit; send fewer recipients per request or smaller content", len(p.body))); err != nil {
		return fmt.Errorf("enqueue notification %s: %w", p.accepted.ID, err)
	}
	status := http.StatusAccepted
	if !won {
		status = http.StatusOK
	}
	writeJSON(w, status, p.accepted)
	return nil
}

// claimKey claims a keyed request's idempotency key before it is queued (notify.KeyClaim), so
// of requests racing under one key exactly one is accepted (won: a 202). A request under a key
// another request holds is refused (409). A retry of the request that holds it (won=false: a
// 200) is queued again all the same: the holder's own enqueue may have failed after its claim,
// and ingest stores a request queued twice once. A request without a key wins at once.
func (s *server) claimKey(ctx context.Context, p *preparedSend) (won bool, err error) {
	if p.key == "" {
		return true, nil
	}
	held, won, err := s.store.ClaimKey(ctx, notify.KeyClaim{Service: p.service, Key: p.key, NotificationID: p.accepted.ID,
		Fingerprint: p.fingerprint, At: s.clock.Now()})
	switch {
	case err != nil:
		return false, fmt.Errorf("claim idempotency key of notification %s: %w", p.accepted.ID, err)
	case !won && held.Fingerprint != p.fingerprint:
		return false, keyReused(held.NotificationID)
	}
	return won, nil
}

// preparedSend is a checked send request, ready for the ingest queue unless stored is set (a
// retry of a request ingest already stored: accepted then has its current status).
type preparedSend struct {
	service     string
	key         string // the request's idempotency key
	accepted    acceptedResponse
	stored      bool
	body        []byte
	attrs       map[string]string
	fingerprint string
	lane        notify.Lane // the queue message's notify.AttrLane, not a request attribute
}

// prepareSend renders req's template, validates it, picks its id and, for a request with an
// idempotency key, looks the notification up: a retry of a stored request is answered with its
// status, another request under the same key is refused.
func (s *server) prepareSend(r *http.Request, req *notify.SendRequest) (*preparedSend, error) {
	ctx := r.Context()
	service := serviceOf(r)
	now := s.clock.Now()
	// A request naming a template is rendered here, before anything is queued, so a missing
	// variable is this request's 400.
	fingerprint, tmplName, tmplVersion, err := req.Prepare(ctx, s.store, service, now, "")
	if err != nil {
		return nil, err
	}
	attrs := map[string]string{}
	if tmplName != "" {
		attrs[notify.AttrTemplateName], attrs[notify.AttrTemplateVersion] = tmplName, strconv.Itoa(tmplVersion)
	}
	if err := s.checkRecipientApps(req.Recipients); err != nil {
		return nil, err
	}
	id := notify.NotificationIDFor(service, req.IdempotencyKey, now)
	p := &preparedSend{service: service, key: req.IdempotencyKey, fingerprint: fingerprint, accepted: acceptedResponse{ID: id, Status: notify.StatusAccepted},
		lane: req.Category.Lane()}
	if req.SendAt != nil && req.SendAt.After(now) {
		p.accepted.Status = notify.StatusScheduled
	}

	// A retry of a request ingest already stored gets its current status and is not queued
	// again; another request under the same key is refused. A retry that races the first one
	// through the queue is deduped by ingest instead, which dead-letters a different request.
	if req.IdempotencyKey != "" {
		n, err := s.store.GetNotification(ctx, id)
		switch {
		case err == nil && n.Service == service && n.Fingerprint != "" && n.Fingerprint != fingerprint:
			return nil, keyReused(id)
		case err == nil && n.Service == service:
			p.stored, p.accepted.Status = true, n.Status
			return p, nil
		case err != nil && !notify.IsCode(err, notify.ENOTFOUND):
			return nil, fmt.Errorf("look up notification %s: %w", id, err)
		}
	}

	// HTML is not escaped: an email's markup would otherwise grow up to six-fold on its way
	// through the queue and could cross the message size limit.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(req); err != nil {
		return nil, fmt.Errorf("marshal send request %s: %w", id, err)
	}
	p.body = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	attrs[notify.AttrNotificationID], attrs[notify.AttrFingerprint] = id, fingerprint
	p.attrs = attrs
	return p, nil
}

func keyReused(id string) error {
	return &notify.Error{Code: notify.EKEYREUSED, Field: "idempotency_key", Message: fmt.Sprintf(
		"idempotency_key already names notification %s, sent with a different request; use a new key for a new notification", id)}
}

// enqueue sends msg to service's ingest queue; tooLarge is the 413's message when it is over
// the queue's size limit.
func (s *server) enqueue(ctx context.Context, service string, msg notify.OutMessage, tooLarge string) error {
	err := s.queue.Send(ctx, notify.IngestQueue(service), msg)
	switch {
	case notify.IsCode(err, notify.ETOOLARGE):
		return &notify.Error{Code: notify.ETOOLARGE, Err: err, Message: tooLarge}
	case notify.IsCode(err, notify.ENOTFOUND):
		// The key is configured but the service's queue is not: an operator's problem, not
		// the caller's, so it must not read as "notification not found".
		return notify.Wrap(notify.EINTERNAL, err, "no ingest queue for service %s", service)
	}
	return err
}

// batchChecks is how many requests of a batch are checked at once.
const batchChecks = 8

// batchRequest is POST /v1/notifications/batch, batchResponse its answer: one entry per
// request, in order.
type batchRequest struct {
	Notifications []json.RawMessage `json:"notifications"`
}

type batchResponse struct {
	Notifications []acceptedResponse `json:"notifications"`
}

// createNotificationBatch checks up to notify.MaxSendBatch send requests as POST
// /v1/notifications would, each on its own, and hands the ones to send to the ingest queue as one
// message (notify.SendBatch): one request for API Gateway, the api function and SQS instead of
// one each per notification. A bad request fails the whole batch — a 4xx naming
// notifications[i] — and nothing is queued; a retry of a stored request is answered with its
// status and not queued again.
func (s *server) createNotificationBatch(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	var in batchRequest
	if err := s.decode(w, r, &in); err != nil {
		return err
	}
	if len(in.Notifications) == 0 || len(in.Notifications) > notify.MaxSendBatch {
		return notify.FieldError("notifications", "want 1 to %d send requests, got %d", notify.MaxSendBatch, len(in.Notifications))
	}
	out := batchResponse{Notifications: make([]acceptedResponse, len(in.Notifications))}
	// Each request is checked on its own, a few at once: a keyed one reads the store.
	ps := make([]*preparedSend, len(in.Notifications))
	errs := notify.Concurrently(len(in.Notifications), batchChecks, func(i int) error {
		var req notify.SendRequest
		if err := decodeJSON(in.Notifications[i], &req); err != nil {
			return err
		}
		var err error
		ps[i], err = s.prepareSend(r, &req)
		return err
	})
	for i, err := range errs {
		if err != nil {
			return notify.InBatch(i, err)
		}
	}
	var (
		toQueue []int              // the requests to queue, in order
		queued  = map[string]int{} // id → index of the request queued under it
	)
	for i, p := range ps {
		out.Notifications[i] = p.accepted
		if p.stored {
			continue
		}
		// One key twice in a batch: the same request is one notification, another is refused.
		if j, ok := queued[p.accepted.ID]; ok {
			if ps[j].fingerprint != p.fingerprint {
				return notify.InBatch(i, keyReused(p.accepted.ID))
			}
			continue
		}
		queued[p.accepted.ID] = i
		toQueue = append(toQueue, i)
	}
	// Keys are claimed once every request is known good, so a batch refused for one bad
	// request holds none of its keys under a body its retry may correct.
	errs = notify.Concurrently(len(toQueue), batchChecks, func(k int) error {
		_, err := s.claimKey(ctx, ps[toQueue[k]])
		return err
	})
	for k, err := range errs {
		if err != nil {
			return notify.InBatch(toQueue[k], err)
		}
	}
	var batch notify.SendBatch
	lane := notify.LaneBulk // the batch's: bulk only when every request is
	for _, i := range toQueue {
		p := ps[i]
		batch.Notifications = append(batch.Notifications, p.body)
		batch.Attributes = append(batch.Attributes, p.attrs)
		if p.lane != notify.LaneBulk {
			lane = notify.LaneRealtime
		}
	}
	if len(batch.Notifications) > 0 {
		body, err := json.Marshal(&batch)
		if err != nil {
			return fmt.Errorf("marshal send batch: %w", err)
		}
		msg := notify.OutMessage{Body: body, GroupID: serviceOf(r), Attributes: map[string]string{notify.AttrLane: string(lane)}}
		if err := s.enqueue(ctx, serviceOf(r), msg, fmt.Sprintf("the batch is %d bytes as JSON, over the queue's message size limit; send fewer notifications per batch", len(body))); err != nil {
			return fmt.Errorf("enqueue a batch of %d notifications: %w", len(batch.Notifications), err)
		}
	}
	writeJSON(w, http.StatusAccepted, out)
	return nil
}

// notificationView is GET /v1/notifications/{id}.
type notificationView struct {
	ID             string                    `json:"id"`
	Service        string                    `json:"service"`
	IdempotencyKey string                    `json:"idempotency_key,omitempty"`
	Status         notify.NotificationStatus `json:"status"`
	Category       notify.Category           `json:"category"`
	Channels       []notify.Channel          `json:"channels"`
	// TemplateName and TemplateVersion name the stored template the content was rendered
	// from; absent for content sent as it is.
	TemplateName    string                          `json:"template_name,omitempty"`
	TemplateVersion int                             `json:"template_version,omitempty"`
	CreatedAt       time.Time                       `json:"created_at"`
	UpdatedAt       time.Time                       `json:"updated_at"`
	SendAt          *time.Time                      `json:"send_at"`
	Stats           map[notify.Channel]channelStats `json:"stats"`
	// SkippedByReason and FailedByReason break the skipped and failed deliveries of every
	// channel down by reason (opted_out, suppressed, expired, …), as a campaign's totals do.
	SkippedByReason map[string]int `json:"skipped_by_reason"`
	FailedByReason  map[string]int `json:"failed_by_reason"`
	Deliveries      []deliveryView `json:"deliveries"`
	NextCursor      string         `json:"next_cursor"`
}

// channelStats are a channel's delivery counts; Pending is those not yet in an end state.
type channelStats struct {
	Total   int `json:"total"`
	Sent    int `json:"sent"`
	Failed  int `json:"failed"`
	Skipped int `json:"skipped"`
	Pending int `json:"pending"`
}

// deliveryView is one delivery with its address masked.
type deliveryView struct {
	ID                string                `json:"id"`
	UserID            string                `json:"user_id,omitempty"`
	Channel           notify.Channel        `json:"channel"`
	Provider          notify.Provider       `json:"provider"`
	Address           string                `json:"address"`
	Status            notify.DeliveryStatus `json:"status"`
	Reason            string                `json:"reason,omitempty"`
	Detail            string                `json:"detail,omitempty"`
	Attempts          int                   `json:"attempts"`
	ProviderMessageID string                `json:"provider_message_id,omitempty"`
	UpdatedAt         time.Time             `json:"updated_at"`
	History           []notify.Attempt      `json:"history,omitempty"`
}

func (s *server) getNotification(w http.ResponseWriter, r *http.Request) error {
	ctx := r.Context()
	id := r.PathValue("id")
	limit, err := queryLimit(r, defaultDeliveryPage, maxDeliveryPage)
	if err != nil {
		return err
	}
	cursor, err := s.queryCursor(r, "deliveries", id)
	if err != nil {
		return err
	}
	n, err := s.ownNotification(r, id)
	if err != nil {
		return err
	}
	ds, next, err := s.store.ListDeliveries(ctx, id, cursor, limit)
	if err != nil {
		return fmt.Errorf("list deliveries of %s: %w", id, err)
	}
	v := notificationView{
		ID:              n.ID,
		Service:         n.Service,
		IdempotencyKey:  n.IdempotencyKey,
		Status:          n.Status,
		Category:        n.Category,
		Channels:        n.Channels,
		TemplateName:    n.TemplateName,
		TemplateVersion: n.TemplateVersion,
		CreatedAt:       utc(n.CreatedAt),
		UpdatedAt:       utc(n.UpdatedAt),
		SendAt:          utcPtr(n.SendAt),
		Stats:           statsView(n),
		SkippedByReason: orEmpty(n.Stats.SkippedByReason),
		FailedByReason:  orEmpty(n.Stats.FailedByReason),
		Deliveries:      make([]deliveryView, 0, len(ds)),
		NextCursor:      s.sealCursor("deliveries", id, next),
	}
	if v.Channels == nil {
		v.Channels = []notify.Channel{}
	}
	for _, d := range ds {
		v.Deliveries = append(v.Deliveries, toDeliveryView(d))
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// statsView has an entry for every requested channel, zero until deliveries exist.
func statsView(n *notify.Notification) map[notify.Channel]channelStats {
	out := make(map[notify.Channel]channelStats, len(n.Channels))
	for _, c := range n.Channels {
		out[c] = channelStats{}
	}
	for c, cs := range n.Stats.Channels {
		out[c] = channelStats{
			Total:   cs.Total,
			Sent:    cs.Sent,
			Failed:  cs.Failed,
			Skipped: cs.Skipped,
			Pending: max(0, cs.Total-cs.Done()),
		}
	}
	return out
}

func toDeliveryView(d notify.Delivery) deliveryView {
	addr := d.AddressMasked
	if addr == "" && d.Address != "" {
		addr = notify.MaskAddress(d.Channel, d.Address) // never the raw address, whatever a store returns
	}
	return deliveryView{
		ID:                d.ID,
		UserID:            d.UserID,
		Channel:           d.Channel,
		Provider:          d.Provider,
		Address:           addr,
		Status:            d.Status,
		Reason:            d.Reason,
		Detail:            d.Detail,
		Attempts:          d.Attempts,
		ProviderMessageID: d.ProviderMessageID,
		UpdatedAt:         utc(d.UpdatedAt),
		History:           utcAttempts(d.History),
	}
}

// utcAttempts is h with its times in UTC.
func utcAttempts(h []notify.Attempt) []notify.Attempt {
	if len(h) == 0 {
		return nil
	}
	out := make([]notify.Attempt, len(h))
	for i, a := range h {
		a.At, a.RetryAt = utc(a.At), utc(a.RetryAt)
		out[i] = a
	}
	return out
}
