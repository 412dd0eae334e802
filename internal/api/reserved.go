package api

import (
	"fmt"
	"net/http"
	"time"

	"herald/internal/notify"
)

// codeNotImplemented answers a route this runtime was wired without (no scheduler, or a store
// that cannot move a send_at): 501, with a message saying so rather than a bare 500.
const codeNotImplemented = "not_implemented"

// rescheduleRequest is PATCH /v1/notifications/{id}.
type rescheduleRequest struct {
	SendAt *time.Time `json:"send_at"`
}

// scheduleResponse answers PATCH and DELETE /v1/notifications/{id}.
type scheduleResponse struct {
	ID     string                    `json:"id"`
	Status notify.NotificationStatus `json:"status"`
	SendAt *time.Time                `json:"send_at"`
}

func writeNotImplemented(w http.ResponseWriter, msg string) {
	writeJSON(w, http.StatusNotImplemented, errorBody{Error: errorDetail{Code: codeNotImplemented, Message: msg}})
}

// validSendAt checks the new time of a reschedule.
func validSendAt(at *time.Time, now time.Time) error {
	switch {
	case at == nil:
		return notify.FieldError("send_at", "is required: the new time of the reserved send (RFC 3339)")
	case !at.After(now):
		return notify.FieldError("send_at", "must be in the future; to send now, cancel and send again")
	case at.After(now.Add(notify.MaxScheduleHorizon)):
		return notify.FieldError("send_at", "at most one year ahead")
	}
	return nil
}

// ownNotification returns the caller's notification id; another service's is reported exactly
// like a missing one. A campaign's id — c_, or an older n_ campaign still dispatching — is not a
// notification here: its notification is the campaign's internal bookkeeping, served as the
// campaign by /v1/campaigns/{id}.
func (s *server) ownNotification(r *http.Request, id string) (*notify.Notification, error) {
	if notify.IsCampaignID(id) {
		return nil, campaignNotNotification(id)
	}
	n, err := s.store.GetNotification(r.Context(), id)
	if notify.IsCode(err, notify.ENOTFOUND) || (err == nil && n.Service != serviceOf(r) && !s.operatorView(r)) {
		return nil, notify.Errorf(notify.ENOTFOUND, "notification %s not found; if it was just accepted it may still be queued, try again in a moment", id)
	}
	if err == nil && n.Status == notify.StatusDispatching {
		return nil, campaignNotNotification(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get notification %s: %w", id, err)
	}
	return n, nil
}

func campaignNotNotification(id string) error {
	return notify.Errorf(notify.ENOTFOUND, "%s is a campaign, not a notification: see /v1/campaigns/%s", id, id)
}

// rescheduleNotification moves a SCHEDULED notification's send_at. The new fire is armed before
// the store changes: if the store write then loses to a fire or a cancel, the extra fire finds
// the notification no longer SCHEDULED and does nothing, while the other order could leave the
// old, earlier fire armed for a notification that should wait.
func (s *server) rescheduleNotification(w http.ResponseWriter, r *http.Request) (err error) {
	ctx := r.Context()
	id := r.PathValue("id")
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditNotificationReschedule, notify.AuditTargetNotification, id, params, &err)
	if notify.IsCampaignID(id) {
		return campaignNotNotification(id)
	}
	var req rescheduleRequest
	if err := s.decodeSendAt(w, r, &req); err != nil {
		return err
	}
	now := s.clock.Now()
	if req.SendAt != nil {
		params["send_at"] = req.SendAt.UTC().Format(time.RFC3339)
	}
	if err := validSendAt(req.SendAt, now); err != nil {
		return err
	}
	rs, ok := s.store.(notify.Rescheduler)
	if s.scheduler == nil || !ok {
		writeNotImplemented(w, "reserved sends are not available in this runtime")
		return nil
	}
	n, err := s.ownNotification(r, id)
	if err != nil {
		return err
	}
	if n.Status != notify.StatusScheduled {
		return notify.Errorf(notify.ECONFLICT, "notification %s is %s, no longer SCHEDULED; it can't be rescheduled", id, n.Status)
	}
	at := notify.ReservedTime(*req.SendAt) // whole seconds, as the schedule keeps it
	params["send_at"], params["previous_send_at"] = at.Format(time.RFC3339), timeParam(n.SendAt)
	if err := s.scheduler.Schedule(ctx, id, notify.IngestQueue(n.Service), at); err != nil {
		return fmt.Errorf("re-arm %s: %w", id, err)
	}
	if err := rs.RescheduleNotification(ctx, id, at); err != nil {
		if notify.IsCode(err, notify.ECONFLICT) {
			return notify.Wrap(notify.ECONFLICT, err, "notification %s is no longer SCHEDULED; it can't be rescheduled", id)
		}
		return fmt.Errorf("reschedule %s: %w", id, err)
	}
	writeJSON(w, http.StatusOK, scheduleResponse{ID: id, Status: notify.StatusScheduled, SendAt: &at})
	return nil
}

// cancelNotification cancels a notification that has not gone out: SCHEDULED (its fire is
// disarmed, and a fire already on its way finds it CANCELED) or ACCEPTED (send skips the
// deliveries of a canceled notification). Cancelling twice answers the same.
func (s *server) cancelNotification(w http.ResponseWriter, r *http.Request) (err error) {
	ctx := r.Context()
	id := r.PathValue("id")
	params := map[string]string{}
	defer s.audit(w, r, notify.AuditNotificationCancel, notify.AuditTargetNotification, id, params, &err)
	n, err := s.ownNotification(r, id)
	if err != nil {
		return err
	}
	params["status_before"] = string(n.Status)
	if n.Status != notify.StatusCanceled {
		err = s.store.SetNotificationStatus(ctx, id, notify.StatusCanceled, notify.StatusScheduled, notify.StatusAccepted)
		if notify.IsCode(err, notify.ECONFLICT) {
			if n, err = s.ownNotification(r, id); err != nil {
				return err
			}
			switch {
			case n.Status.Final() && n.Status != notify.StatusCanceled:
				return notify.Errorf(notify.EFINISHED, "notification %s is %s: it already went out and can't be canceled", id, n.Status)
			case n.Status != notify.StatusCanceled:
				return notify.Errorf(notify.ECONFLICT, "notification %s is %s: it is going out and can't be canceled", id, n.Status)
			}
		} else if err != nil {
			return fmt.Errorf("cancel %s: %w", id, err)
		}
	}
	if s.scheduler != nil {
		// The fire would do nothing now; disarming it only saves the trip.
		if err := s.scheduler.Unschedule(ctx, id); err != nil {
			s.log.WarnContext(ctx, "unschedule canceled notification", "notification_id", id, "error", err)
		}
	}
	writeJSON(w, http.StatusOK, scheduleResponse{ID: id, Status: notify.StatusCanceled, SendAt: utcPtr(n.SendAt)})
	return nil
}
