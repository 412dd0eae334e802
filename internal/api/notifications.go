package api

import (
	"bytes"
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
	service := serviceOf(r)
	var req notify.SendRequest
	if err := s.decodeSendAt(w, r, &req); err != nil {
		return err
	}
	now := s.clock.Now()
	// A request naming a template is rendered here, before anything is queued, so a missing
	// variable is this request's 400. Its fingerprint is of the request as sent (template and
	// data), so a retry matches it whatever the rendering.
	var fingerprint string
	attrs := map[string]string{}
	if req.Template != nil {
		fingerprint = notify.RequestFingerprint(&req)
		name, version, err := req.ApplyTemplate(ctx, s.store, service)
		if err != nil {
			return err
		}
		attrs[notify.AttrTemplateName], attrs[notify.AttrTemplateVersion] = name, strconv.Itoa(version)
	}
	if err := req.Validate(now); err != nil {
		return err
	}
	if err := s.checkRecipientApps(req.Recipients); err != nil {
		return err
	}
	id := notify.NotificationIDFor(service, req.IdempotencyKey, now)
	if fingerprint == "" {
		fingerprint = notify.RequestFingerprint(&req)
	}

	// A retry of a request ingest already stored gets its current status and is not queued
	// again; another request under the same key is refused. A retry that races the first one
	// through the queue is deduped by ingest instead, which dead-letters a different request.
	if req.IdempotencyKey != "" {
		n, err := s.store.GetNotification(ctx, id)
		switch {
		case err == nil && n.Service == service && n.Fingerprint != "" && n.Fingerprint != fingerprint:
			return &notify.Error{Code: notify.EKEYREUSED, Field: "idempotency_key", Message: fmt.Sprintf(
				"idempotency_key already names notification %s, sent with a different request; use a new key for a new notification", id)}
		case err == nil && n.Service == service:
			w.Header().Set("Location", "/v1/notifications/"+url.PathEscape(id))
			writeJSON(w, http.StatusOK, acceptedResponse{ID: id, Status: n.Status})
			return nil
		case err != nil && !notify.IsCode(err, notify.ENOTFOUND):
			return fmt.Errorf("look up notification %s: %w", id, err)
		}
	}

	// HTML is not escaped: an email's markup would otherwise grow up to six-fold on its way
	// through the queue and could cross the message size limit.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&req); err != nil {
		return fmt.Errorf("marshal send request %s: %w", id, err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	attrs[notify.AttrNotificationID], attrs[notify.AttrFingerprint] = id, fingerprint
	msg := notify.OutMessage{
		Body:       body,
		GroupID:    service,
		Attributes: attrs,
	}
	if err := s.queue.Send(ctx, notify.IngestQueue(service), msg); err != nil {
		if notify.IsCode(err, notify.ETOOLARGE) {
			return &notify.Error{Code: notify.ETOOLARGE, Err: err, Message: fmt.Sprintf(
				"the notification is %d bytes as JSON, over the queue's message size limit; send fewer recipients per request or smaller content", len(body))}
		}
		if notify.IsCode(err, notify.ENOTFOUND) {
			// The key is configured but the service's queue is not: an operator's problem, not
			// the caller's, so it must not read as "notification not found".
			return notify.Wrap(notify.EINTERNAL, err, "no ingest queue for service %s", service)
		}
		return fmt.Errorf("enqueue notification %s: %w", id, err)
	}
	w.Header().Set("Location", "/v1/notifications/"+url.PathEscape(id))
	status := notify.StatusAccepted
	if req.SendAt != nil && req.SendAt.After(now) {
		status = notify.StatusScheduled
	}
	writeJSON(w, http.StatusAccepted, acceptedResponse{ID: id, Status: status})
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
	}
}
