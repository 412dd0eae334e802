package scheduler

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/scheduler"
	"github.com/aws/aws-sdk-go-v2/service/scheduler/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"herald/internal/notify"
)

func testConfig() Config {
	return Config{
		GroupName: "herald-test",
		RoleARN:   "arn:aws:iam::123456789012:role/herald-test-scheduler",
		QueueARNs: map[string]string{"ingest-shop": "arn:aws:sqs:us-east-1:123456789012:herald-test-ingest-shop"},
		DLQARN:    "arn:aws:sqs:us-east-1:123456789012:herald-test-scheduler-dlq",
	}.withDefaults()
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestCreateScheduleInput(t *testing.T) {
	t.Parallel()
	at := time.Date(2030, 3, 1, 9, 30, 0, 0, time.UTC)
	tests := []struct {
		name     string
		zone     string
		id       string
		queue    string
		at       time.Time
		wantName string
		wantExpr string
		wantZone string
		wantCode string // an error with this code instead of an input
	}{
		{name: "UTC", zone: "UTC", id: "n_01jq8zz", queue: "ingest-shop", at: at,
			wantName: "n_01jq8zz", wantExpr: "at(2030-03-01T09:30:00)", wantZone: "UTC"},
		{name: "written in the configured zone", zone: "Asia/Seoul", id: "n_01jq8zz", queue: "ingest-shop", at: at,
			wantName: "n_01jq8zz", wantExpr: "at(2030-03-01T18:30:00)", wantZone: "Asia/Seoul"},
		{name: "zone with daylight saving, unambiguous", zone: "America/New_York", id: "n_1", queue: "ingest-shop",
			at: time.Date(2030, 7, 1, 12, 0, 0, 0, time.UTC), wantName: "n_1", wantExpr: "at(2030-07-01T08:00:00)", wantZone: "America/New_York"},
		// 2030-11-03 01:30 happens twice in New York; the first (EDT) is 05:30Z, the second (EST) 06:30Z.
		{name: "repeated wall time, first", zone: "America/New_York", id: "n_1", queue: "ingest-shop",
			at: time.Date(2030, 11, 3, 5, 30, 0, 0, time.UTC), wantName: "n_1", wantExpr: "at(2030-11-03T05:30:00)", wantZone: "UTC"},
		{name: "repeated wall time, second", zone: "America/New_York", id: "n_1", queue: "ingest-shop",
			at: time.Date(2030, 11, 3, 6, 30, 0, 0, time.UTC), wantName: "n_1", wantExpr: "at(2030-11-03T06:30:00)", wantZone: "UTC"},
		{name: "just after the repeated hour", zone: "America/New_York", id: "n_1", queue: "ingest-shop",
			at: time.Date(2030, 11, 3, 7, 0, 0, 0, time.UTC), wantName: "n_1", wantExpr: "at(2030-11-03T02:00:00)", wantZone: "America/New_York"},
		{name: "id that is not a schedule name", zone: "UTC", id: "campaign/2030 spring", queue: "ingest-shop", at: at,
			wantName: scheduleName("campaign/2030 spring"), wantExpr: "at(2030-03-01T09:30:00)", wantZone: "UTC"},
		{name: "unknown queue", zone: "UTC", id: "n_1", queue: "ingest-nope", at: at, wantCode: notify.ENOTFOUND},
		{name: "empty id", zone: "UTC", id: "", queue: "ingest-shop", at: at, wantCode: notify.EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig()
			in, err := createScheduleInput(cfg, mustZone(t, tt.zone), tt.id, tt.queue, tt.at, tt.at)
			if tt.wantCode != "" {
				if !notify.IsCode(err, tt.wantCode) {
					t.Fatalf("err = %v, want code %s", err, tt.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := &scheduler.CreateScheduleInput{
				Name:                       aws.String(tt.wantName),
				GroupName:                  aws.String("herald-test"),
				Description:                aws.String("Herald reserved send: fire notification " + tt.id + " onto ingest-shop"),
				ScheduleExpression:         aws.String(tt.wantExpr),
				ScheduleExpressionTimezone: aws.String(tt.wantZone),
				FlexibleTimeWindow:         &types.FlexibleTimeWindow{Mode: types.FlexibleTimeWindowModeOff},
				ActionAfterCompletion:      types.ActionAfterCompletionDelete,
				State:                      types.ScheduleStateEnabled,
				Target: &types.Target{
					Arn:     aws.String("arn:aws:sqs:us-east-1:123456789012:herald-test-ingest-shop"),
					RoleArn: aws.String("arn:aws:iam::123456789012:role/herald-test-scheduler"),
					Input:   aws.String(`{"fire":"` + tt.id + `","at":"` + tt.at.UTC().Format(time.RFC3339Nano) + `"}`),
					RetryPolicy: &types.RetryPolicy{
						MaximumRetryAttempts:     aws.Int32(185),
						MaximumEventAgeInSeconds: aws.Int32(86400),
					},
					DeadLetterConfig: &types.DeadLetterConfig{Arn: aws.String("arn:aws:sqs:us-east-1:123456789012:herald-test-scheduler-dlq")},
				},
			}
			if !reflect.DeepEqual(in, want) {
				t.Fatalf("input =\n%s\nwant\n%s", dump(in), dump(want))
			}
			// The expression names the same instant in the zone it says.
			got, err := time.ParseInLocation("2006-01-02T15:04:05", strings.TrimSuffix(strings.TrimPrefix(tt.wantExpr, "at("), ")"), mustZone(t, tt.wantZone))
			if err != nil || !got.Equal(tt.at) {
				t.Fatalf("%s in %s is %v, want %v", tt.wantExpr, tt.wantZone, got, tt.at)
			}
		})
	}
}

func TestCreateScheduleInputRetryPolicyFromConfig(t *testing.T) {
	t.Parallel()
	cfg := testConfig()
	cfg.MaxRetryAttempts, cfg.MaxEventAge = 10, 2*time.Hour
	in, err := createScheduleInput(cfg, time.UTC, "n_1", "ingest-shop", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	if p := in.Target.RetryPolicy; *p.MaximumRetryAttempts != 10 || *p.MaximumEventAgeInSeconds != 7200 {
		t.Fatalf("retry policy = %d attempts, %d s; want 10, 7200", *p.MaximumRetryAttempts, *p.MaximumEventAgeInSeconds)
	}
}

func dump(in *scheduler.CreateScheduleInput) string {
	t := in.Target
	return strings.Join([]string{
		"name=" + aws.ToString(in.Name), "group=" + aws.ToString(in.GroupName), "desc=" + aws.ToString(in.Description),
		"expr=" + aws.ToString(in.ScheduleExpression), "zone=" + aws.ToString(in.ScheduleExpressionTimezone),
		"flex=" + string(in.FlexibleTimeWindow.Mode), "after=" + string(in.ActionAfterCompletion), "state=" + string(in.State),
		"target=" + aws.ToString(t.Arn), "role=" + aws.ToString(t.RoleArn), "input=" + aws.ToString(t.Input),
	}, "\n")
}

func TestUpdateScheduleInputIsTheWholeDefinition(t *testing.T) {
	t.Parallel()
	in, err := createScheduleInput(testConfig(), time.UTC, "n_1", "ingest-shop", time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	if err != nil {
		t.Fatal(err)
	}
	in.ClientToken = aws.String("token-of-the-create-call")
	u := updateScheduleInput(in)
	if u.ClientToken != nil {
		t.Fatalf("update reuses the create call's idempotency token %q", *u.ClientToken)
	}
	cv, uv := reflect.ValueOf(in).Elem(), reflect.ValueOf(u).Elem()
	for i := range cv.NumField() {
		f := cv.Type().Field(i)
		if !f.IsExported() || f.Name == "ClientToken" {
			continue
		}
		if !reflect.DeepEqual(cv.Field(i).Interface(), uv.FieldByName(f.Name).Interface()) {
			t.Errorf("UpdateSchedule %s differs from CreateSchedule's", f.Name)
		}
	}
}

func TestFireTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		at     time.Time
		want   time.Time
		reason string
	}{
		{"future, whole second", now.Add(time.Hour), now.Add(time.Hour), "kept"},
		{"future, fraction", now.Add(time.Hour + 300*time.Millisecond), now.Add(time.Hour + time.Second), "rounded up, never before send_at"},
		{"exactly MinLead ahead", now.Add(MinLead), now.Add(MinLead), "kept"},
		{"sooner than MinLead", now.Add(10 * time.Second), now.Add(MinLead), "moved to now+MinLead"},
		{"in the past", now.Add(-time.Hour), now.Add(MinLead), "moved to now+MinLead"},
	}
	for _, tt := range tests {
		if got := fireTime(tt.at, now); !got.Equal(tt.want) {
			t.Errorf("%s: fireTime = %v, want %v (%s)", tt.name, got, tt.want, tt.reason)
		}
	}
	// A now with a fraction still gives a whole second no earlier than now+MinLead.
	frac := now.Add(400 * time.Millisecond)
	if got := fireTime(frac, frac); got.Before(frac.Add(MinLead)) || got.Nanosecond() != 0 {
		t.Errorf("fireTime(now with fraction) = %v", got)
	}
}

func TestScheduleName(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 64)
	tests := []struct {
		id   string
		want string // "" = hashed: just valid and distinct
	}{
		{"n_01jq8zzab3x7kc9m2t4v6w8y0a", "n_01jq8zzab3x7kc9m2t4v6w8y0a"},
		{"a.b-c_D", "a.b-c_D"},
		{long, long},
		{long + "y", ""},
		{"n/1", ""},
		{"n_1 ", ""},
		{"주문", ""},
	}
	seen := map[string]string{}
	for _, tt := range tests {
		got := scheduleName(tt.id)
		if !validName(got) {
			t.Errorf("scheduleName(%q) = %q, not a valid schedule name", tt.id, got)
		}
		if tt.want != "" && got != tt.want {
			t.Errorf("scheduleName(%q) = %q, want %q", tt.id, got, tt.want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("ids %q and %q share the schedule name %q", other, tt.id, got)
		}
		seen[got] = tt.id
	}
	// Ids that sanitise alike still get distinct names.
	if scheduleName("n/1") == scheduleName("n:1") {
		t.Error(`"n/1" and "n:1" share a schedule name`)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	if err := testConfig().Validate(); err != nil {
		t.Fatalf("valid config: %v", err)
	}
	bad := Config{
		GroupName: "bad group", RoleARN: "role", QueueARNs: map[string]string{"ingest-x": "queue"},
		TimeZone: "Mars/Olympus", MaxRetryAttempts: 186, MaxEventAge: time.Second,
	}
	err := bad.Validate()
	if err == nil {
		t.Fatal("invalid config passed")
	}
	for _, field := range []string{"GroupName", "RoleARN", "QueueARNs", "DLQARN", "TimeZone", "MaxRetryAttempts", "MaxEventAge"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error does not name %s: %v", field, err)
		}
	}
	if _, err := New(nil, testConfig()); err == nil {
		t.Error("New(nil client) succeeded")
	}
	if _, err := New(scheduler.New(scheduler.Options{Region: "us-east-1"}), bad); err == nil {
		t.Error("New with an invalid config succeeded")
	}
}

func TestTranslate(t *testing.T) {
	t.Parallel()
	respErr := func(status int, code string) error {
		var inner error = errors.New("boom")
		if code != "" {
			inner = &smithy.GenericAPIError{Code: code, Message: "service says no"}
		}
		return &smithy.OperationError{ServiceID: "Scheduler", OperationName: "CreateSchedule", Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}}, Err: inner},
		}}
	}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"validation", respErr(400, "ValidationException"), notify.EINVALID},
		{"throttling", respErr(429, "ThrottlingException"), notify.ETHROTTLED},
		{"quota", respErr(402, "ServiceQuotaExceededException"), notify.ETHROTTLED},
		{"conflict", respErr(409, "ConflictException"), notify.ECONFLICT},
		{"not found", respErr(404, "ResourceNotFoundException"), notify.ENOTFOUND},
		{"internal", respErr(500, "InternalServerException"), notify.EUNAVAILABLE},
		{"access denied", respErr(403, "AccessDeniedException"), notify.EAUTH},
		{"unknown 503", respErr(503, "SomethingNew"), notify.EUNAVAILABLE},
		{"unknown 429", respErr(429, ""), notify.ETHROTTLED},
		{"unknown 400", respErr(400, "SomethingNew"), notify.EINTERNAL},
		{"no response", &smithy.OperationError{Err: &smithyhttp.RequestSendError{Err: errors.New("connection refused")}}, notify.EUNAVAILABLE},
	}
	for _, tt := range tests {
		err := translate(tt.err, "scheduler: arm %s", "n_1")
		if got := notify.ErrorCode(err); got != tt.want {
			t.Errorf("%s: code %s, want %s (%v)", tt.name, got, tt.want, err)
		}
		if !strings.Contains(err.Error(), "scheduler: arm n_1") || !errors.Is(err, tt.err) {
			t.Errorf("%s: %v lacks the context or the cause", tt.name, err)
		}
	}
}
