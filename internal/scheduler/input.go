package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"herald/internal/notify"
)

// MinLead is how far ahead of now a schedule is armed at the earliest. EventBridge Scheduler
// rejects an at() in the past, and "now" at AWS is a few seconds and possibly some SDK retries
// later than ours; the service fires with one-minute precision anyway. A send_at closer than
// this (or already past, e.g. when ingest is redelivered late) fires MinLead from now instead —
// the local scheduler likewise fires an overdue row on its next tick.
const MinLead = time.Minute

// maxNameLen is EventBridge Scheduler's limit on a schedule name.
const maxNameLen = 64

// scheduleName is the name of id's schedule: id itself when it is a valid name (notification
// and campaign ids are: "n_" or "c_" + 26 base32 characters), so the console shows which one a
// schedule fires. Any other id gets its invalid characters replaced and a hash of the original
// appended, so distinct ids keep distinct names.
func scheduleName(id string) string {
	if validName(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "-" + hex.EncodeToString(sum[:8])
	clean := strings.Map(func(r rune) rune {
		if nameChar(r) {
			return r
		}
		return '_'
	}, id)
	if len(clean) > maxNameLen-len(suffix) {
		clean = clean[:maxNameLen-len(suffix)]
	}
	return clean + suffix
}

// validName reports whether s matches Scheduler's name pattern [0-9a-zA-Z-_.]{1,64}.
func validName(s string) bool {
	if s == "" || len(s) > maxNameLen {
		return false
	}
	for _, r := range s {
		if !nameChar(r) {
			return false
		}
	}
	return true
}

func nameChar(r rune) bool {
	return r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_' || r == '.'
}

// fireTime is when id's schedule fires for a requested at: at, rounded up to the whole second
// (at() has no fraction, and rounding down would fire before send_at), but no earlier than
// now+MinLead.
func fireTime(at, now time.Time) time.Time {
	t := ceilSecond(at)
	if earliest := ceilSecond(now.Add(MinLead)); t.Before(earliest) {
		t = earliest
	}
	return t
}

func ceilSecond(t time.Time) time.Time {
	s := t.Truncate(time.Second)
	if s.Before(t) {
		s = s.Add(time.Second)
	}
	return s
}

// atExpression writes t as at(yyyy-mm-ddThh:mm:ss) in loc and returns the zone name to send as
// ScheduleExpressionTimezone. A wall time that occurs twice in loc (the hour repeated when
// daylight saving time ends) would be ambiguous, so such a t is written in UTC instead.
func atExpression(t time.Time, loc *time.Location) (expr, zone string) {
	if repeatedWallTime(t, loc) {
		loc = time.UTC
	}
	return "at(" + t.In(loc).Format("2006-01-02T15:04:05") + ")", loc.String()
}

// repeatedWallTime reports whether another instant shows the same wall clock as t in loc.
func repeatedWallTime(t time.Time, loc *time.Location) bool {
	wall := t.In(loc)
	_, off := wall.Zone()
	layout := "2006-01-02T15:04:05"
	// A zone transition near t shows up as a different offset a day before or after.
	for _, probe := range []time.Time{t.Add(-24 * time.Hour), t.Add(24 * time.Hour)} {
		_, other := probe.In(loc).Zone()
		if other == off {
			continue
		}
		twin := t.Add(time.Duration(off-other) * time.Second)
		if twin.In(loc).Format(layout) == wall.Format(layout) {
			return true
		}
	}
	return false
}

// createScheduleInput is the whole definition of id's one-time schedule firing at fireAt onto
// queue, with a fire message naming armedFor — the send_at it is armed for, as the store keeps
// it (notify.ReservedTime), not the time it fires, which MinLead may have moved: ingest compares
// the two exactly to tell a current fire from a superseded one. It is pure; UpdateSchedule is sent the same definition (UpdateSchedule replaces every
// field, so a partial update would silently drop the target, retry policy or DLQ).
func createScheduleInput(cfg Config, loc *time.Location, id, queue string, armedFor, fireAt time.Time) (*scheduler.CreateScheduleInput, error) {
	if id == "" {
		return nil, notify.FieldError("id", "a schedule needs a notification id")
	}
	queueARN, ok := cfg.QueueARNs[queue]
	if !ok {
		return nil, notify.Errorf(notify.ENOTFOUND, "scheduler: no ARN configured for queue %q", queue)
	}
	armedFor = notify.ReservedTime(armedFor)
	input, err := json.Marshal(notify.FireMessage{Fire: id, At: &armedFor})
	if err != nil {
		return nil, notify.Wrap(notify.EINTERNAL, err, "scheduler: encode fire message")
	}
	expr, zone := atExpression(fireAt, loc)
	name := scheduleName(id)
	return &scheduler.CreateScheduleInput{
		Name:                       aws.String(name),
		GroupName:                  aws.String(cfg.GroupName),
		Description:                aws.String("Herald reserved send: fire notification " + id + " onto " + queue),
		ScheduleExpression:         aws.String(expr),
		ScheduleExpressionTimezone: aws.String(zone),
		FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		ActionAfterCompletion:      types.ActionAfterCompletionDelete,
		State:                      types.ScheduleStateEnabled,
		Target: &types.Target{
			Arn:     aws.String(queueARN),
			RoleArn: aws.String(cfg.RoleARN),
			Input:   aws.String(string(input)),
			RetryPolicy: &types.RetryPolicy{
				MaximumRetryAttempts:     aws.Int32(int32(cfg.MaxRetryAttempts)),
				MaximumEventAgeInSeconds: aws.Int32(int32(cfg.MaxEventAge / time.Second)),
			},
			DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String(cfg.DLQARN)},
		},
	}, nil
}

// updateScheduleInput is in as an UpdateSchedule request. The conversion compiles only while
// the two request types have exactly the same fields, which is what "replaces the whole
// definition" needs; a fresh idempotency token is left for the SDK to fill.
func updateScheduleInput(in *scheduler.CreateScheduleInput) *scheduler.UpdateScheduleInput {
	u := scheduler.UpdateScheduleInput(*in)
	u.ClientToken = nil
	return &u
}
