package schedulerfake_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"

	"herald/internal/scheduler/schedulerfake"
)

var now = time.Date(2030, 5, 1, 8, 0, 0, 0, time.UTC)

func setup(t *testing.T) (*schedulerfake.Server, *scheduler.Client) {
	t.Helper()
	fake := schedulerfake.New(schedulerfake.Options{Now: func() time.Time { return now }})
	t.Cleanup(fake.Close)
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	return fake, scheduler.New(scheduler.Options{
		Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", ""),
		BaseEndpoint: aws.String(fake.URL), HTTPClient: &http.Client{Transport: transport}, RetryMaxAttempts: 1,
	})
}

func oneTime(name, expr string, retries int32, after types.ActionAfterCompletion) *scheduler.CreateScheduleInput {
	return &scheduler.CreateScheduleInput{
		Name: aws.String(name), ScheduleExpression: aws.String(expr), ActionAfterCompletion: after,
		FlexibleTimeWindow: &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
		Target: &types.Target{
			Arn: aws.String("arn:aws:sqs:us-east-1:123456789012:q"), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"),
			Input:            aws.String(`{"fire":"` + name + `"}`),
			RetryPolicy:      &types.RetryPolicy{MaximumRetryAttempts: aws.Int32(retries)},
			DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String("arn:aws:sqs:us-east-1:123456789012:dlq")},
		},
	}
}

func TestFailedInvocationsRetryThenDeadLetter(t *testing.T) {
	t.Parallel()
	fake, client := setup(t)
	if _, err := client.CreateSchedule(t.Context(), oneTime("s1", "at(2030-05-01T09:00:00)", 2, types.ActionAfterCompletionDelete)); err != nil {
		t.Fatal(err)
	}
	due := now.Add(time.Hour)
	var attempts []int
	failing := func(inv schedulerfake.Invocation) error {
		attempts = append(attempts, inv.Attempt)
		return errors.New("queue down")
	}
	for range 4 {
		if n := fake.Fire(due, failing); n != 0 {
			t.Fatalf("%d succeeded", n)
		}
	}
	if len(attempts) != 3 || attempts[2] != 3 {
		t.Fatalf("attempts %v, want 1, 2, 3 (first try and two retries)", attempts)
	}
	dl := fake.DeadLetters()
	if len(dl) != 1 || dl[0].TargetArn != "arn:aws:sqs:us-east-1:123456789012:dlq" || dl[0].Input != `{"fire":"s1"}` {
		t.Fatalf("dead letters %+v", dl)
	}
	if _, ok := fake.Schedule("default", "s1"); ok {
		t.Fatal("dead-lettered schedule with ActionAfterCompletion DELETE still exists")
	}
}

func TestActionAfterCompletionNoneKeepsSpentSchedule(t *testing.T) {
	t.Parallel()
	fake, client := setup(t)
	if _, err := client.CreateSchedule(t.Context(), oneTime("s1", "at(2030-05-01T09:00:00)", 0, "")); err != nil {
		t.Fatal(err)
	}
	ok := func(schedulerfake.Invocation) error { return nil }
	if fake.Fire(now.Add(time.Hour), ok) != 1 || fake.Fire(now.Add(2*time.Hour), ok) != 0 {
		t.Fatal("a one-time schedule must fire exactly once")
	}
	if sc, found := fake.Schedule("default", "s1"); !found || sc.ActionAfterCompletion != "NONE" {
		t.Fatalf("schedule = %+v, %v; want it kept with ActionAfterCompletion NONE", sc, found)
	}
}

func TestValidation(t *testing.T) {
	t.Parallel()
	_, client := setup(t)
	tests := []struct {
		name string
		edit func(in *scheduler.CreateScheduleInput)
	}{
		{"rate expression", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpression = aws.String("rate(5 minutes)") }},
		{"malformed at", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpression = aws.String("at(2030-05-01 09:00)") }},
		{"past at", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpression = aws.String("at(2030-05-01T07:59:59)") }},
		{"past in its zone", func(in *scheduler.CreateScheduleInput) {
			in.ScheduleExpressionTimezone = aws.String("Asia/Seoul") // 09:00 KST is 00:00 UTC
		}},
		{"unknown zone", func(in *scheduler.CreateScheduleInput) { in.ScheduleExpressionTimezone = aws.String("Mars/Olympus") }},
		{"bad name", func(in *scheduler.CreateScheduleInput) { in.Name = aws.String("a b") }},
		{"flexible without window", func(in *scheduler.CreateScheduleInput) {
			in.FlexibleTimeWindow.Mode = types.FlexibleTimeWindowModeFlexible
		}},
		{"retry attempts", func(in *scheduler.CreateScheduleInput) { in.Target.RetryPolicy.MaximumRetryAttempts = aws.Int32(186) }},
		{"event age", func(in *scheduler.CreateScheduleInput) {
			in.Target.RetryPolicy.MaximumEventAgeInSeconds = aws.Int32(59)
		}},
	}
	for _, tt := range tests {
		in := oneTime("s1", "at(2030-05-01T09:00:00)", 0, "")
		tt.edit(in)
		_, err := client.CreateSchedule(t.Context(), in)
		var ve *types.ValidationException
		if !errors.As(err, &ve) {
			t.Errorf("%s: %v, want ValidationException", tt.name, err)
		}
	}
}

func TestErrorShapes(t *testing.T) {
	t.Parallel()
	fake, client := setup(t)
	in := oneTime("s1", "at(2030-05-01T09:00:00)", 0, "")
	if _, err := client.CreateSchedule(t.Context(), in); err != nil {
		t.Fatal(err)
	}
	in.ClientToken = nil
	var conflict *types.ConflictException
	if _, err := client.CreateSchedule(t.Context(), in); !errors.As(err, &conflict) {
		t.Fatalf("second create: %v, want ConflictException", err)
	}
	var rnf *types.ResourceNotFoundException
	upd := scheduler.UpdateScheduleInput(*oneTime("nope", "at(2030-05-01T09:00:00)", 0, ""))
	if _, err := client.UpdateSchedule(t.Context(), &upd); !errors.As(err, &rnf) {
		t.Fatalf("update of a missing schedule: %v, want ResourceNotFoundException", err)
	}
	if _, err := client.DeleteSchedule(t.Context(), &scheduler.DeleteScheduleInput{Name: aws.String("nope")}); !errors.As(err, &rnf) {
		t.Fatalf("delete of a missing schedule: %v, want ResourceNotFoundException", err)
	}
	in = oneTime("s2", "at(2030-05-01T09:00:00)", 0, "")
	in.GroupName = aws.String("missing")
	if _, err := client.CreateSchedule(t.Context(), in); !errors.As(err, &rnf) {
		t.Fatalf("create in a missing group: %v, want ResourceNotFoundException", err)
	}
	if _, err := client.CreateScheduleGroup(t.Context(), &scheduler.CreateScheduleGroupInput{Name: aws.String("missing")}); err != nil {
		t.Fatal(err)
	}
	in.ClientToken = nil
	if _, err := client.CreateSchedule(t.Context(), in); err != nil {
		t.Fatalf("create after the group was created: %v", err)
	}
	var throttled *types.ThrottlingException
	fake.FailNext("GetSchedule", 429, "ThrottlingException", "slow down")
	if _, err := client.GetSchedule(t.Context(), &scheduler.GetScheduleInput{Name: aws.String("s1")}); !errors.As(err, &throttled) {
		t.Fatalf("injected throttle: %v", err)
	}
	// Anything else the fake does not serve says so.
	resp, err := http.Get(fake.URL + "/schedules")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(body), "does not serve") {
		t.Fatalf("unknown route: %d %s", resp.StatusCode, body)
	}
}
