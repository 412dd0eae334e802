package pipeline

import (
	"fmt"
	"slices"

	"herald/internal/notify"
)

// The stage messages name what they carry: decode checks each for the fields its stage cannot
// work without, so a body that is JSON but not the stage's message — {}, null, an S3 or SNS
// envelope, another stage's message — is refused with its reason (dead-lettered), never
// acknowledged as work done. Unknown fields are let through: during a deploy a newer producer
// may add one an older consumer does not know.

// checked is a stage message that can say what it lacks.
type checked interface {
	check() error
}

func (m *prepareMsg) check() error {
	switch {
	case m.NotificationID == "":
		return notify.FieldError("notification_id", "prepare: required")
	case m.Chunk < 0:
		return notify.FieldError("chunk", "prepare: %d is negative", m.Chunk)
	}
	return nil
}

func (m *recordMsg) check() error {
	if m.NotificationID == "" {
		return notify.FieldError("notification_id", "record: required")
	}
	return nil
}

func (m *sendMsg) check() error {
	if err := checkBatch("send", m.NotificationID, m.Provider, len(m.Items)); err != nil {
		return err
	}
	for i := range m.Items {
		if err := m.Items[i].check("send", i); err != nil {
			return err
		}
	}
	return nil
}

func (m *verdictMsg) check() error {
	if err := checkBatch("verdict check", m.NotificationID, m.Provider, len(m.Items)); err != nil {
		return err
	}
	for i := range m.Items {
		if err := m.Items[i].check("verdict check", i); err != nil {
			return err
		}
		if m.Items[i].ProviderMessageID == "" {
			return notify.FieldError(fmt.Sprintf("items[%d].provider_message_id", i), "verdict check: required")
		}
	}
	return nil
}

// checkBatch checks what a send batch and a verdict check share.
func checkBatch(stage, notificationID string, prov notify.Provider, items int) error {
	switch {
	case notificationID == "":
		return notify.FieldError("notification_id", "%s: required", stage)
	case !slices.Contains(notify.Providers, prov):
		return notify.FieldError("provider", "%s: %q is not a provider", stage, prov)
	case items == 0:
		return notify.FieldError("items", "%s: at least one delivery is required", stage)
	}
	return nil
}

func (it *sendItem) check(stage string, i int) error {
	switch {
	case it.DeliveryID == "":
		return notify.FieldError(fmt.Sprintf("items[%d].id", i), "%s: required", stage)
	case it.Address == "":
		return notify.FieldError(fmt.Sprintf("items[%d].address", i), "%s: required", stage)
	}
	return nil
}
