package scheduler_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awssched "github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"herald/internal/notify"
	"herald/internal/scheduler"
	"herald/internal/scheduler/schedulerfake"
)

const (
	group    = "herald-test"
	queue    = "ingest-shop"
	queueARN = "arn:aws:sqs:us-east-1:123456789012:herald-test-ingest-shop"
	dlqARN   = "arn:aws:sqs:us-east-1:123456789012:herald-test-scheduler-dlq"
	roleARN  = "arn:aws:iam::123456789012:role/herald-test-scheduler"
)

// clock is the one "now" shared by the adapter and the fake service.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

type fixture struct {
	fake   *schedulerfake.Server
	client *awssched.Client // what the console (or anyone else) uses
	sched  *scheduler.Scheduler
	clock  *clock
}

func setup(t *testing.T) fixture {
	t.Helper()
	clk := &clock{t: time.Date(2030, 5, 1, 8, 0, 0, 0, time.UTC)}
	fake := schedulerfake.New(schedulerfake.Options{Now: clk.Now, Groups: []string{group}})
	t.Cleanup(fake.Close)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections) // runs before fake.Close
	client := awssched.New(awssched.Options{
		Region:       "us-east-1",
		Credentials:  credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint: aws.String(fake.URL),
		HTTPClient:   &http.Client{Transport: transport},
		// Injected failures answer once; the adapter's own handling is under test, not the SDK's.
		RetryMaxAttempts: 1,
	})
	s, err := scheduler.New(client, scheduler.Config{
		GroupName: group, RoleARN: roleARN, QueueARNs: map[string]string{queue: queueARN}, DLQARN: dlqARN,
		Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{fake: fake, client: client, sched: s, clock: clk}
}

// fired collects invocations, checking each is a fire message onto the ingest queue.
type fired struct {
	t   *testing.T
	ids []string
}

func (f *fired) invoke(inv schedulerfake.Invocation) error {
	if inv.TargetArn != queueARN || inv.RoleArn != roleARN {
		f.t.Errorf("invocation targets %s as %s", inv.TargetArn, inv.RoleArn)
	}
	var m notify.FireMessage
	if err := json.Unmarshal([]byte(inv.Input), &m); err != nil || m.Fire == "" {
		f.t.Errorf("invocation input %q is not a fire message", inv.Input)
	}
	f.ids = append(f.ids, m.Fire)
	return nil
}

func TestScheduleArmsOneTimeSchedule(t *testing.T) {
	t.Parallel()
	f := setup(t)
	at := f.clock.Now().Add(2 * time.Hour)
	if err := f.sched.Schedule(t.Context(), "n_01abc", queue, at); err != nil {
		t.Fatal(err)
	}
	sc, ok := f.fake.Schedule(group, "n_01abc")
	if !ok {
		t.Fatalf("no schedule n_01abc in %s: %+v", group, f.fake.Schedules(group))
	}
	if sc.ScheduleExpression != "at(2030-05-01T10:00:00)" || sc.ScheduleExpressionTimezone != "UTC" ||
		sc.FlexibleTimeWindow.Mode != "OFF" || sc.ActionAfterCompletion != "DELETE" || sc.State != "ENABLED" {
		t.Fatalf("schedule = %+v", sc)
	}
	tg := sc.Target
	if tg.Arn != queueARN || tg.RoleArn != roleARN || tg.Input != `{"fire":"n_01abc","at":"`+at.UTC().Format(time.RFC3339Nano)+`"}` ||
		tg.DeadLetterConfig == nil || tg.DeadLetterConfig.Arn != dlqARN ||
		tg.RetryPolicy == nil || *tg.RetryPolicy.MaximumRetryAttempts != 185 || *tg.RetryPolicy.MaximumEventAgeInSeconds != 86400 {
		t.Fatalf("target = %+v", tg)
	}
	// What the service sends back through the SDK is the same definition.
	out, err := f.client.GetSchedule(t.Context(), &awssched.GetScheduleInput{Name: aws.String("n_01abc"), GroupName: aws.String(group)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ScheduleExpression) != sc.ScheduleExpression || aws.ToString(out.Target.Input) != tg.Input ||
		out.ActionAfterCompletion != types.ActionAfterCompletionDelete || out.CreationDate == nil {
		t.Fatalf("GetSchedule = %+v", out)
	}
}

func TestRescheduleReplacesAndFiresOnce(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	first, second := now.Add(time.Hour), now.Add(3*time.Hour)
	if err := f.sched.Schedule(t.Context(), "n_1", queue, first); err != nil {
		t.Fatal(err)
	}
	if err := f.sched.Schedule(t.Context(), "n_1", queue, second); err != nil {
		t.Fatalf("re-arm: %v", err)
	}
	if c, u := f.fake.Calls("CreateSchedule"), f.fake.Calls("UpdateSchedule"); c != 2 || u != 1 {
		t.Fatalf("calls: %d CreateSchedule, %d UpdateSchedule; want 2 and 1 (create, conflict, update)", c, u)
	}
	if n := len(f.fake.Schedules(group)); n != 1 {
		t.Fatalf("%d schedules, want 1", n)
	}
	// UpdateSchedule replaced the whole definition, so it must have carried all of it.
	if sc, _ := f.fake.Schedule(group, "n_1"); sc.ActionAfterCompletion != "DELETE" || sc.Target.DeadLetterConfig == nil ||
		sc.Target.RetryPolicy == nil || sc.Target.Input != `{"fire":"n_1","at":"`+second.UTC().Format(time.RFC3339Nano)+`"}` {
		t.Fatalf("re-armed schedule lost part of its definition: %+v", sc)
	}
	got := &fired{t: t}
	if n := f.fake.Fire(first, got.invoke); n != 0 {
		t.Fatalf("%d fired at the replaced time", n)
	}
	if n := f.fake.Fire(second, got.invoke); n != 1 || len(got.ids) != 1 || got.ids[0] != "n_1" {
		t.Fatalf("fire at the new time: %d fired, ids %v", n, got.ids)
	}
	if _, ok := f.fake.Schedule(group, "n_1"); ok {
		t.Fatal("schedule still there after firing with ActionAfterCompletion DELETE")
	}
	if n := f.fake.Fire(second.Add(24*time.Hour), got.invoke); n != 0 {
		t.Fatalf("fired %d more times", n)
	}
}

func TestRearmAfterFireCreatesAgain(t *testing.T) {
	t.Parallel()
	f := setup(t)
	at := f.clock.Now().Add(time.Hour)
	if err := f.sched.Schedule(t.Context(), "n_1", queue, at); err != nil {
		t.Fatal(err)
	}
	got := &fired{t: t}
	f.fake.Fire(at, got.invoke)
	f.clock.mu.Lock()
	f.clock.t = at
	f.clock.mu.Unlock()
	// The notification was rescheduled after its fire: the schedule is gone, so it is created.
	if err := f.sched.Schedule(t.Context(), "n_1", queue, at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if f.fake.Fire(at.Add(time.Hour), got.invoke) != 1 || len(got.ids) != 2 {
		t.Fatalf("fires: %v", got.ids)
	}
}

func TestScheduleVanishingBetweenCreateAndUpdate(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// CreateSchedule says the schedule exists, but it fires and deletes itself before
	// UpdateSchedule arrives: the adapter creates it again.
	f.fake.FailNext("CreateSchedule", http.StatusConflict, "ConflictException", "Schedule n_1 already exists.")
	if err := f.sched.Schedule(t.Context(), "n_1", queue, f.clock.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, ok := f.fake.Schedule(group, "n_1"); !ok {
		t.Fatal("schedule not created")
	}
	if c, u := f.fake.Calls("CreateSchedule"), f.fake.Calls("UpdateSchedule"); c != 2 || u != 1 {
		t.Fatalf("calls: %d CreateSchedule, %d UpdateSchedule; want 2 and 1", c, u)
	}
}

// The console shows the schedule; an operator edits its time there. UpdateSchedule replaces the
// whole definition, so the console sends it all back with a new expression. The fire still
// carries only the stored notification's id, fires once, and the schedule deletes itself.
func TestConsoleEditStillFiresStoredIDOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		move time.Duration
	}{{"later", 5 * time.Hour}, {"earlier", -30 * time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			armed := f.clock.Now().Add(time.Hour)
			if err := f.sched.Schedule(t.Context(), "n_console", queue, armed); err != nil {
				t.Fatal(err)
			}
			cur, err := f.client.GetSchedule(t.Context(), &awssched.GetScheduleInput{Name: aws.String("n_console"), GroupName: aws.String(group)})
			if err != nil {
				t.Fatal(err)
			}
			edited := armed.Add(tc.move)
			_, err = f.client.UpdateSchedule(t.Context(), &awssched.UpdateScheduleInput{
				Name: cur.Name, GroupName: cur.GroupName, Description: cur.Description,
				ScheduleExpression:         aws.String("at(" + edited.UTC().Format("2006-01-02T15:04:05") + ")"),
				ScheduleExpressionTimezone: cur.ScheduleExpressionTimezone,
				FlexibleTimeWindow:         cur.FlexibleTimeWindow, ActionAfterCompletion: cur.ActionAfterCompletion,
				State: cur.State, Target: cur.Target,
			})
			if err != nil {
				t.Fatalf("console edit: %v", err)
			}
			got := &fired{t: t}
			if edited.After(armed) {
				if n := f.fake.Fire(armed, got.invoke); n != 0 {
					t.Fatalf("fired %d at the time the edit moved away from", n)
				}
			}
			if n := f.fake.Fire(edited, got.invoke); n != 1 {
				t.Fatalf("fired %d at the edited time, want 1", n)
			}
			if n := f.fake.Fire(edited.Add(48*time.Hour), got.invoke); n != 0 {
				t.Fatalf("fired %d more after the first", n)
			}
			if len(got.ids) != 1 || got.ids[0] != "n_console" {
				t.Fatalf("fired ids %v, want [n_console]", got.ids)
			}
			_, err = f.client.GetSchedule(t.Context(), &awssched.GetScheduleInput{Name: aws.String("n_console"), GroupName: aws.String(group)})
			var rnf *types.ResourceNotFoundException
			if !errors.As(err, &rnf) {
				t.Fatalf("GetSchedule after the fire: %v, want ResourceNotFoundException (ActionAfterCompletion DELETE)", err)
			}
			if err := f.sched.Unschedule(t.Context(), "n_console"); err != nil {
				t.Fatalf("Unschedule of a fired schedule: %v", err)
			}
		})
	}
}

func TestPastSendAtFiresAfterMinLead(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	// The service refuses an at() in the past outright …
	_, err := f.client.CreateSchedule(t.Context(), &awssched.CreateScheduleInput{
		Name: aws.String("direct"), GroupName: aws.String(group),
		ScheduleExpression: aws.String("at(" + now.Add(-time.Minute).Format("2006-01-02T15:04:05") + ")"),
		FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		Target:             &types.Target{Arn: aws.String(queueARN), RoleArn: aws.String(roleARN)},
	})
	var ve *types.ValidationException
	if !errors.As(err, &ve) {
		t.Fatalf("past at() = %v, want ValidationException", err)
	}
	// … so a send_at that is already due (ingest redelivered late) is armed MinLead from now.
	if err := f.sched.Schedule(t.Context(), "n_late", queue, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	sc, ok := f.fake.Schedule(group, "n_late")
	want := "at(" + now.Add(scheduler.MinLead).Format("2006-01-02T15:04:05") + ")"
	if !ok || sc.ScheduleExpression != want {
		t.Fatalf("schedule %+v, want %s", sc, want)
	}
	got := &fired{t: t}
	if f.fake.Fire(now.Add(scheduler.MinLead), got.invoke) != 1 {
		t.Fatal("the late schedule did not fire")
	}
}

func TestUnschedule(t *testing.T) {
	t.Parallel()
	f := setup(t)
	at := f.clock.Now().Add(time.Hour)
	if err := f.sched.Schedule(t.Context(), "n_1", queue, at); err != nil {
		t.Fatal(err)
	}
	if err := f.sched.Unschedule(t.Context(), "n_1"); err != nil {
		t.Fatal(err)
	}
	if err := f.sched.Unschedule(t.Context(), "n_1"); err != nil {
		t.Fatalf("second Unschedule: %v", err)
	}
	if err := f.sched.Unschedule(t.Context(), "n_never"); err != nil {
		t.Fatalf("Unschedule of an unknown id: %v", err)
	}
	got := &fired{t: t}
	if n := f.fake.Fire(at.Add(time.Hour), got.invoke); n != 0 {
		t.Fatalf("%d fired after Unschedule", n)
	}
}

func TestErrorsCarryCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		op     string
		status int
		code   string
		want   string
	}{
		{"validation", "CreateSchedule", 400, "ValidationException", notify.EINVALID},
		{"throttled", "CreateSchedule", 429, "ThrottlingException", notify.ETHROTTLED},
		{"internal", "CreateSchedule", 500, "InternalServerException", notify.EUNAVAILABLE},
		{"unknown 5xx", "CreateSchedule", 503, "ServiceUnavailable", notify.EUNAVAILABLE},
		{"denied", "CreateSchedule", 403, "AccessDeniedException", notify.EAUTH},
		{"update throttled", "UpdateSchedule", 429, "ThrottlingException", notify.ETHROTTLED},
		{"delete throttled", "DeleteSchedule", 429, "ThrottlingException", notify.ETHROTTLED},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			at := f.clock.Now().Add(time.Hour)
			var err error
			switch tt.op {
			case "CreateSchedule":
				f.fake.FailNext(tt.op, tt.status, tt.code, "injected")
				err = f.sched.Schedule(t.Context(), "n_1", queue, at)
			case "UpdateSchedule":
				if err := f.sched.Schedule(t.Context(), "n_1", queue, at); err != nil {
					t.Fatal(err)
				}
				f.fake.FailNext(tt.op, tt.status, tt.code, "injected")
				err = f.sched.Schedule(t.Context(), "n_1", queue, at.Add(time.Hour))
			case "DeleteSchedule":
				f.fake.FailNext(tt.op, tt.status, tt.code, "injected")
				err = f.sched.Unschedule(t.Context(), "n_1")
			}
			if !notify.IsCode(err, tt.want) {
				t.Fatalf("err = %v, want code %s", err, tt.want)
			}
			if !strings.Contains(err.Error(), "n_1") || !strings.Contains(err.Error(), group) {
				t.Fatalf("error %q does not name the schedule and group", err)
			}
		})
	}
}

func TestScheduleRefusesWithoutCalling(t *testing.T) {
	t.Parallel()
	f := setup(t)
	if err := f.sched.Schedule(t.Context(), "n_1", "ingest-unknown", f.clock.Now().Add(time.Hour)); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Fatalf("unknown queue: %v, want ENOTFOUND", err)
	}
	if err := f.sched.Schedule(t.Context(), "", queue, f.clock.Now().Add(time.Hour)); !notify.IsCode(err, notify.EINVALID) {
		t.Fatalf("empty id: %v, want EINVALID", err)
	}
	if n := f.fake.Calls("CreateSchedule"); n != 0 {
		t.Fatalf("%d calls for requests that cannot work", n)
	}
}

func TestMissingGroupIsNotFound(t *testing.T) {
	t.Parallel()
	f := setup(t)
	s, err := scheduler.New(f.client, scheduler.Config{
		GroupName: "herald-missing", RoleARN: roleARN, QueueARNs: map[string]string{queue: queueARN}, DLQARN: dlqARN, Clock: f.clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Schedule(t.Context(), "n_1", queue, f.clock.Now().Add(time.Hour)); !notify.IsCode(err, notify.ENOTFOUND) {
		t.Fatalf("Schedule into a missing group: %v, want ENOTFOUND", err)
	}
}
