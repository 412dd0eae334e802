package api

import (
	"fmt"
	"net/http"
	"time"

	"herald/internal/notify"
)

// reservedView is one upcoming reserved send for the operator: a SCHEDULED notification or
// campaign of any service.
type reservedView struct {
	Kind    string    `json:"kind"` // notification or campaign
	ID      string    `json:"id"`
	Service string    `json:"service"`
	SendAt  time.Time `json:"send_at"`
}

type reservedPage struct {
	Reserved   []reservedView `json:"reserved"`
	NextCursor string         `json:"next_cursor"`
}

// listReserved is GET /v1/admin/reserved: the reserved sends waiting for their fire, one store
// page per call — notifications first, then campaigns, as POST /v1/admin/schedules/rearm walks
// them (the same listings; on DynamoDB a bounded scan, so a page may hold fewer than limit, even
// none, with a next_cursor). Entries come in the store's order; the console sorts what it shows.
func (s *server) listReserved(w http.ResponseWriter, r *http.Request) error {
	if err := s.operatorOnly(r); err != nil {
		return err
	}
	limit, phase, inner, err := s.reservedPage(r, "reserved")
	if err != nil {
		return err
	}
	campaigns, _ := s.store.(notify.ReservedCampaignLister)
	out := reservedPage{Reserved: []reservedView{}}
	kind := "notification"
	var page []notify.Reserved
	var next string
	if phase == rearmNotifications {
		if page, next, err = s.store.ListScheduledNotifications(r.Context(), inner, limit); err != nil {
			return fmt.Errorf("list scheduled notifications: %w", err)
		}
		if next != "" {
			out.NextCursor = rearmNotifications + next
		} else if campaigns != nil {
			out.NextCursor = rearmCampaigns
		}
	} else if campaigns != nil {
		kind = "campaign"
		if page, next, err = campaigns.ListReservedCampaigns(r.Context(), inner, limit); err != nil {
			return fmt.Errorf("list reserved campaigns: %w", err)
		}
		if next != "" {
			out.NextCursor = rearmCampaigns + next
		}
	}
	for _, p := range page {
		out.Reserved = append(out.Reserved, reservedView{Kind: kind, ID: p.ID, Service: p.Service, SendAt: p.SendAt.UTC()})
	}
	out.NextCursor = s.sealCursor("reserved", "", out.NextCursor)
	writeJSON(w, http.StatusOK, out)
	return nil
}

// adminAction serves a service route's action on any service's notification or campaign for an
// admin; a refused one is audited like those that run (which audit themselves).
func (s *server) adminAction(w http.ResponseWriter, r *http.Request, action notify.AuditAction, target string, serve func(http.ResponseWriter, *http.Request) error) error {
	if err := s.operatorOnly(r); err != nil {
		s.audit(w, r, action, target, r.PathValue("id"), nil, &err)
		return err
	}
	return serve(w, r)
}

func (s *server) adminRescheduleNotification(w http.ResponseWriter, r *http.Request) error {
	return s.adminAction(w, r, notify.AuditNotificationReschedule, notify.AuditTargetNotification, s.rescheduleNotification)
}

func (s *server) adminCancelNotification(w http.ResponseWriter, r *http.Request) error {
	return s.adminAction(w, r, notify.AuditNotificationCancel, notify.AuditTargetNotification, s.cancelNotification)
}

func (s *server) adminRescheduleCampaign(w http.ResponseWriter, r *http.Request) error {
	return s.adminAction(w, r, notify.AuditCampaignReschedule, notify.AuditTargetCampaign, s.rescheduleCampaign)
}
