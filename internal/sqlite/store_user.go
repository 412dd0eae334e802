package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"herald/internal/notify"
)

// PutDevice implements notify.UserStore. The token is the key, so the upsert both replaces the
// user's registration and moves a token that another user had.
func (s *Store) PutDevice(ctx context.Context, d notify.Device) error {
	if d.UserID == "" || d.Token == "" {
		return fmt.Errorf("sqlite: put device: %w", notify.Errorf(notify.EINVALID, "user id and token are required"))
	}
	_, err := s.db.W.ExecContext(ctx, `INSERT INTO devices
		(token, user_id, platform, app, environment, locale, time_zone, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, platform = excluded.platform,
			app = excluded.app, environment = excluded.environment, locale = excluded.locale,
			time_zone = excluded.time_zone, updated_at = excluded.updated_at`,
		d.Token, d.UserID, string(d.Platform), d.App, d.Environment, d.Locale, d.TimeZone, nanosOf(s.nowOr(d.UpdatedAt)))
	if err != nil {
		return fmt.Errorf("sqlite: put device of %s: %w", d.UserID, err)
	}
	return nil
}

// DeleteDevice implements notify.UserStore.
func (s *Store) DeleteDevice(ctx context.Context, userID, token string) error {
	res, err := s.db.W.ExecContext(ctx, `DELETE FROM devices WHERE token = ? AND user_id = ?`, token, userID)
	if err == nil {
		var k int64
		if k, err = res.RowsAffected(); err == nil && k == 0 {
			err = notify.Errorf(notify.ENOTFOUND, "device not registered to user")
		}
	}
	if err != nil {
		return fmt.Errorf("sqlite: delete device of %s: %w", userID, err)
	}
	return nil
}

// RemoveDeadDevice implements notify.UserStore. The updated_at guard is in the DELETE itself, so
// a registration landing between the failed send and the cleanup always survives.
func (s *Store) RemoveDeadDevice(ctx context.Context, token string, seenBefore time.Time) (bool, error) {
	res, err := s.db.W.ExecContext(ctx, `DELETE FROM devices WHERE token = ? AND updated_at <= ?`,
		token, nanosOf(seenBefore))
	if err != nil {
		return false, fmt.Errorf("sqlite: remove dead device: %w", err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: remove dead device: %w", err)
	}
	return k > 0, nil
}

// ListDevices implements notify.UserStore.
func (s *Store) ListDevices(ctx context.Context, userIDs []string) (map[string][]notify.Device, error) {
	out := make(map[string][]notify.Device)
	for _, batch := range batchesOf(userIDs, storeBatch) {
		rows, err := s.db.R.QueryContext(ctx, `SELECT user_id, platform, app, token, environment, locale, time_zone, updated_at
			FROM devices WHERE user_id IN (`+sqlIn(len(batch))+`) ORDER BY user_id, token`, stringArgs(batch)...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list devices: %w", err)
		}
		err = func() error {
			defer rows.Close()
			for rows.Next() {
				var (
					d        notify.Device
					platform string
					updated  int64
				)
				if err := rows.Scan(&d.UserID, &platform, &d.App, &d.Token, &d.Environment, &d.Locale,
					&d.TimeZone, &updated); err != nil {
					return err
				}
				d.Platform = notify.Platform(platform)
				d.UpdatedAt = timeOfNanos(updated)
				out[d.UserID] = append(out[d.UserID], d)
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("sqlite: list devices: %w", err)
		}
	}
	return out, nil
}

// PutContact implements notify.UserStore. The whole contact, user id included, is sealed: the id
// inside lets GetContacts reject a sealed value copied onto another user's row.
func (s *Store) PutContact(ctx context.Context, c notify.Contact) error {
	if c.UserID == "" {
		return fmt.Errorf("sqlite: put contact: %w", notify.Errorf(notify.EINVALID, "user id is required"))
	}
	c.UpdatedAt = s.nowOr(c.UpdatedAt)
	plain, err := json.Marshal(&c)
	if err != nil {
		return fmt.Errorf("sqlite: put contact of %s: encode: %w", c.UserID, err)
	}
	sealed, err := s.cipher.Seal(plain)
	if err != nil {
		return fmt.Errorf("sqlite: put contact of %s: %w", c.UserID, err)
	}
	// The contact and the owners of its addresses change together: the user's earlier addresses
	// are no longer theirs, and an address another user held is now this one's.
	err = s.db.Tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO contacts (user_id, sealed) VALUES (?, ?)
			ON CONFLICT (user_id) DO UPDATE SET sealed = excluded.sealed`, c.UserID, sealed); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM contact_owners WHERE user_id = ?`, c.UserID); err != nil {
			return err
		}
		for _, k := range notify.ContactKeys(c) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO contact_owners (address_key, user_id) VALUES (?, ?)
				ON CONFLICT (address_key) DO UPDATE SET user_id = excluded.user_id`, k, c.UserID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: put contact of %s: %w", c.UserID, err)
	}
	return nil
}

var _ notify.AddressFinder = (*Store)(nil)

// UserByAddress implements notify.AddressFinder: a push token's row in devices, or an email's or
// phone's in contact_owners.
func (s *Store) UserByAddress(ctx context.Context, c notify.Channel, address string) (string, error) {
	var user string
	var err error
	switch c {
	case notify.ChannelPush:
		err = s.db.R.QueryRowContext(ctx, `SELECT user_id FROM devices WHERE token = ?`, strings.TrimSpace(address)).Scan(&user)
	case notify.ChannelEmail, notify.ChannelSMS:
		err = s.db.R.QueryRowContext(ctx, `SELECT user_id FROM contact_owners WHERE address_key = ?`,
			notify.AddressKey(c, address)).Scan(&user)
	default:
		return "", fmt.Errorf("sqlite: user by address: %w", notify.FieldError("channel", "no %s address belongs to a user", c))
	}
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("sqlite: user by address: %w", notify.Errorf(notify.ENOTFOUND, "no user has this %s address", c))
	}
	if err != nil {
		return "", fmt.Errorf("sqlite: user by address: %w", err)
	}
	return user, nil
}

// GetContacts implements notify.UserStore.
func (s *Store) GetContacts(ctx context.Context, userIDs []string) (map[string]notify.Contact, error) {
	out := make(map[string]notify.Contact)
	err := s.eachUserDoc(ctx, `contacts`, `sealed`, userIDs, func(userID string, sealed []byte) error {
		plain, err := s.cipher.Open(sealed)
		if err != nil {
			return fmt.Errorf("contact of %s: %w", userID, err)
		}
		var c notify.Contact
		if err := json.Unmarshal(plain, &c); err != nil {
			return fmt.Errorf("decode contact of %s: %w", userID, err)
		}
		if c.UserID != userID {
			return fmt.Errorf("contact row of %s holds another user's contact", userID)
		}
		out[userID] = c
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: get contacts: %w", err)
	}
	return out, nil
}

// PutPreferences implements notify.UserStore.
func (s *Store) PutPreferences(ctx context.Context, p notify.Preferences) error {
	if p.UserID == "" {
		return fmt.Errorf("sqlite: put preferences: %w", notify.Errorf(notify.EINVALID, "user id is required"))
	}
	optOut, err := json.Marshal(p.OptOut)
	if err != nil {
		return fmt.Errorf("sqlite: put preferences of %s: encode: %w", p.UserID, err)
	}
	if _, err := s.db.W.ExecContext(ctx, `INSERT INTO preferences
		(user_id, opt_out, marketing_consent_at, night_consent_at, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (user_id) DO UPDATE SET opt_out = excluded.opt_out,
			marketing_consent_at = excluded.marketing_consent_at, night_consent_at = excluded.night_consent_at,
			updated_at = excluded.updated_at`,
		p.UserID, optOut, nullNanosOf(p.MarketingConsent), nullNanosOf(p.NightConsent), nanosOf(s.nowOr(p.UpdatedAt))); err != nil {
		return fmt.Errorf("sqlite: put preferences of %s: %w", p.UserID, err)
	}
	return nil
}

// GetPreferences implements notify.UserStore.
func (s *Store) GetPreferences(ctx context.Context, userIDs []string) (map[string]notify.Preferences, error) {
	out := make(map[string]notify.Preferences)
	for _, batch := range batchesOf(userIDs, storeBatch) {
		rows, err := s.db.R.QueryContext(ctx, `SELECT user_id, opt_out, marketing_consent_at, night_consent_at, updated_at
			FROM preferences WHERE user_id IN (`+sqlIn(len(batch))+`)`, stringArgs(batch)...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: get preferences: %w", err)
		}
		err = func() error {
			defer rows.Close()
			for rows.Next() {
				var (
					p             notify.Preferences
					optOut        []byte
					market, night sql.NullInt64
					updated       int64
				)
				if err := rows.Scan(&p.UserID, &optOut, &market, &night, &updated); err != nil {
					return err
				}
				if err := json.Unmarshal(optOut, &p.OptOut); err != nil {
					return fmt.Errorf("decode opt-outs of %s: %w", p.UserID, err)
				}
				p.MarketingConsent = timePtrOfNull(market)
				p.NightConsent = timePtrOfNull(night)
				p.UpdatedAt = timeOfNanos(updated)
				out[p.UserID] = p
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("sqlite: get preferences: %w", err)
		}
	}
	return out, nil
}

// eachUserDoc calls fn with the user id and blob column of every row of table whose user is
// among userIDs, in IN-lists of storeBatch. table and column are constants of this file.
func (s *Store) eachUserDoc(ctx context.Context, table, column string, userIDs []string, fn func(string, []byte) error) error {
	for _, batch := range batchesOf(userIDs, storeBatch) {
		rows, err := s.db.R.QueryContext(ctx, `SELECT user_id, `+column+` FROM `+table+
			` WHERE user_id IN (`+sqlIn(len(batch))+`)`, stringArgs(batch)...)
		if err != nil {
			return err
		}
		err = func() error {
			defer rows.Close()
			for rows.Next() {
				var (
					id  string
					doc []byte
				)
				if err := rows.Scan(&id, &doc); err != nil {
					return err
				}
				if err := fn(id, doc); err != nil {
					return err
				}
			}
			return rows.Err()
		}()
		if err != nil {
			return err
		}
	}
	return nil
}

// Suppress implements notify.SuppressionStore; a second suppression of the same key refreshes
// the stored reason and time.
func (s *Store) Suppress(ctx context.Context, sp notify.Suppression) error {
	if sp.AddressKey == "" {
		return fmt.Errorf("sqlite: suppress: %w", notify.Errorf(notify.EINVALID, "address key is required"))
	}
	_, err := s.db.W.ExecContext(ctx, `INSERT INTO suppressions (address_key, channel, masked, reason, created_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (address_key) DO UPDATE SET channel = excluded.channel, masked = excluded.masked,
			reason = excluded.reason, created_at = excluded.created_at`,
		sp.AddressKey, string(sp.Channel), sp.Masked, sp.Reason, nanosOf(s.nowOr(sp.CreatedAt)))
	if err != nil {
		return fmt.Errorf("sqlite: suppress: %w", err)
	}
	return nil
}

// Suppressed implements notify.SuppressionStore.
func (s *Store) Suppressed(ctx context.Context, addressKeys []string) (map[string]notify.Suppression, error) {
	out := make(map[string]notify.Suppression)
	for _, batch := range batchesOf(addressKeys, storeBatch) {
		rows, err := s.db.R.QueryContext(ctx, `SELECT address_key, channel, masked, reason, created_at
			FROM suppressions WHERE address_key IN (`+sqlIn(len(batch))+`)`, stringArgs(batch)...)
		if err != nil {
			return nil, fmt.Errorf("sqlite: suppressed: %w", err)
		}
		err = func() error {
			defer rows.Close()
			for rows.Next() {
				var (
					sp      notify.Suppression
					ch      string
					created int64
				)
				if err := rows.Scan(&sp.AddressKey, &ch, &sp.Masked, &sp.Reason, &created); err != nil {
					return err
				}
				sp.Channel = notify.Channel(ch)
				sp.CreatedAt = timeOfNanos(created)
				out[sp.AddressKey] = sp
			}
			return rows.Err()
		}()
		if err != nil {
			return nil, fmt.Errorf("sqlite: suppressed: %w", err)
		}
	}
	return out, nil
}
