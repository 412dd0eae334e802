// Package scheduler arms reserved sends on Amazon EventBridge Scheduler: one one-time schedule
// per notification or campaign, whose target puts notify.FireMessage{Fire: id, At: send_at} on
// the service's ingest queue and which deletes itself after it fired. The schedule carries only
// the id and the send_at it was armed for, so whatever the stored send says when it fires wins:
// a fire for a send_at a reschedule replaced is stale, a cancel makes it a no-op, and an edit of
// the schedule's time in the console (which keeps the input) is honoured — the send goes out
// then, and its stored send_at follows. The local runtime's counterpart is sqlite.Scheduler.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // Lambda's provided.al2023 image may have no zoneinfo; TimeZone must still load.

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"

	"herald/internal/awserr"
	"herald/internal/notify"
)

// Defaults, and EventBridge Scheduler's bounds for them.
const (
	DefaultTimeZone         = "UTC"
	DefaultMaxRetryAttempts = 185 // the service's maximum and default
	DefaultMaxEventAge      = 24 * time.Hour
	minEventAge             = time.Minute
)

// Config says where schedules live and what they target.
type Config struct {
	GroupName string            // schedule group, one per environment (e.g. "herald-prod")
	RoleARN   string            // role the schedule assumes; needs sqs:SendMessage on the queues and the DLQ
	QueueARNs map[string]string // logical ingest queue name (notify.IngestQueue) → SQS queue ARN
	DLQARN    string            // SQS queue that receives fires which ran out of retries
	// TimeZone is the IANA zone at() expressions are written in, for whoever reads them in the
	// console; default UTC. The instant fired is the same in any zone.
	TimeZone string
	// MaxRetryAttempts is how often a failed fire is retried, 0–185; 0 means the default, 185.
	MaxRetryAttempts int
	// MaxEventAge is how long a failed fire keeps being retried, 1 min–24 h; default 24 h.
	MaxEventAge time.Duration
	// Clock decides when "now" is for MinLead; nil means the system clock.
	Clock notify.Clock
}

func (c Config) withDefaults() Config {
	if c.TimeZone == "" {
		c.TimeZone = DefaultTimeZone
	}
	if c.MaxRetryAttempts == 0 {
		c.MaxRetryAttempts = DefaultMaxRetryAttempts
	}
	if c.MaxEventAge == 0 {
		c.MaxEventAge = DefaultMaxEventAge
	}
	if c.Clock == nil {
		c.Clock = notify.SystemClock{}
	}
	return c
}

// Validate reports every problem with c (defaults applied first).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if !validName(c.GroupName) {
		errs = append(errs, fmt.Errorf("GroupName %q: want 1–64 of [0-9A-Za-z-_.]", c.GroupName))
	}
	if !strings.HasPrefix(c.RoleARN, "arn:") {
		errs = append(errs, fmt.Errorf("RoleARN %q: want an IAM role ARN", c.RoleARN))
	}
	if len(c.QueueARNs) == 0 {
		errs = append(errs, errors.New("QueueARNs: want at least one ingest queue"))
	}
	for name, arn := range c.QueueARNs {
		if name == "" || !strings.HasPrefix(arn, "arn:") {
			errs = append(errs, fmt.Errorf("QueueARNs[%q] = %q: want a queue name and an SQS queue ARN", name, arn))
		}
	}
	if !strings.HasPrefix(c.DLQARN, "arn:") {
		errs = append(errs, fmt.Errorf("DLQARN %q: want an SQS queue ARN", c.DLQARN))
	}
	if c.TimeZone == "Local" {
		errs = append(errs, errors.New(`TimeZone "Local": want an IANA zone name`))
	} else if _, err := time.LoadLocation(c.TimeZone); err != nil {
		errs = append(errs, fmt.Errorf("TimeZone %q: %w", c.TimeZone, err))
	}
	if c.MaxRetryAttempts < 0 || c.MaxRetryAttempts > DefaultMaxRetryAttempts {
		errs = append(errs, fmt.Errorf("MaxRetryAttempts %d: want 0–%d", c.MaxRetryAttempts, DefaultMaxRetryAttempts))
	}
	if c.MaxEventAge < minEventAge || c.MaxEventAge > DefaultMaxEventAge {
		errs = append(errs, fmt.Errorf("MaxEventAge %v: want %v–%v", c.MaxEventAge, minEventAge, DefaultMaxEventAge))
	}
	return errors.Join(errs...)
}

// Scheduler implements notify.Scheduler on EventBridge Scheduler.
type Scheduler struct {
	client *scheduler.Client
	cfg    Config
	loc    *time.Location
}

var _ notify.Scheduler = (*Scheduler)(nil)

// New checks cfg and returns a Scheduler using client. The schedule group must exist (infra/
// creates it).
func New(client *scheduler.Client, cfg Config) (*Scheduler, error) {
	if client == nil {
		return nil, errors.New("scheduler: nil client")
	}
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("scheduler: config: %w", err)
	}
	loc, err := time.LoadLocation(cfg.TimeZone)
	if err != nil {
		return nil, fmt.Errorf("scheduler: config: %w", err)
	}
	return &Scheduler{client: client, cfg: cfg, loc: loc}, nil
}

// Schedule arms id's one-time fire onto queue at `at`, replacing the definition of any schedule
// id already has (CreateSchedule, and on ConflictException UpdateSchedule with the whole
// definition). An `at` earlier than now+MinLead fires at now+MinLead: Scheduler refuses at()
// in the past, and an error would leave a SCHEDULED notification that nothing ever fires.
// Errors: ENOTFOUND for a queue without a configured ARN (or a missing schedule group),
// EINVALID when Scheduler rejects the definition, ETHROTTLED, EUNAVAILABLE, EAUTH.
func (s *Scheduler) Schedule(ctx context.Context, id, queue string, at time.Time) error {
	in, err := createScheduleInput(s.cfg, s.loc, id, queue, at, fireTime(at, s.cfg.Clock.Now()))
	if err != nil {
		return fmt.Errorf("schedule %s: %w", id, err)
	}
	name := aws.ToString(in.Name)
	// Create, else replace. Between the two the schedule may fire and delete itself (or be
	// unscheduled), so a vanished schedule sends us back to Create; a few rounds suffice.
	for range 3 {
		in.ClientToken = nil // a new request needs a new idempotency token; the SDK fills it
		_, err = s.client.CreateSchedule(ctx, in)
		if err == nil || awserr.APICode(err) != "ConflictException" {
			break
		}
		_, err = s.client.UpdateSchedule(ctx, updateScheduleInput(in))
		if err == nil || awserr.APICode(err) != "ResourceNotFoundException" {
			break
		}
	}
	if err != nil {
		return translate(err, "scheduler: arm %s in group %s (%s)", name, s.cfg.GroupName, aws.ToString(in.ScheduleExpression))
	}
	return nil
}

// Unschedule deletes id's schedule; one that does not exist (never armed, already fired and
// deleted, or deleted in the console) is no error.
func (s *Scheduler) Unschedule(ctx context.Context, id string) error {
	if id == "" {
		return notify.FieldError("id", "unschedule needs a notification id")
	}
	name := scheduleName(id)
	_, err := s.client.DeleteSchedule(ctx, &scheduler.DeleteScheduleInput{
		Name:      aws.String(name),
		GroupName: aws.String(s.cfg.GroupName),
	})
	if err == nil || awserr.APICode(err) == "ResourceNotFoundException" {
		return nil
	}
	return translate(err, "scheduler: delete %s in group %s", name, s.cfg.GroupName)
}
