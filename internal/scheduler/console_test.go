package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssched "github.com/aws/aws-sdk-go-v2/service/scheduler"

	"herald/internal/campaign"
	"herald/internal/notify"
	"herald/internal/pipeline"
	"herald/internal/scheduler/schedulerfake"
	"herald/internal/seal"
	"herald/internal/sqlite"
)

func (c *clock) set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// startedRuns is campaign.Executions that records generation starts.
type startedRuns struct {
	mu      sync.Mutex
	started map[string]bool
}

func (x *startedRuns) Start(_ context.Context, id string, gen int) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.started[campaign.ExecutionName(id, gen)] = true
	return nil
}

func (x *startedRuns) Started(_ context.Context, id string, gen int) (bool, bool, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ok := x.started[campaign.ExecutionName(id, gen)]
	return ok, ok, nil
}

// consoleEdit moves schedule name to `to` as the EventBridge console does: UpdateSchedule with
// the whole definition read back — the same input, so the fire still names the old send_at.
func consoleEdit(t *testing.T, f fixture, name string, to time.Time) {
	t.Helper()
	cur, err := f.client.GetSchedule(t.Context(), &awssched.GetScheduleInput{Name: aws.String(name), GroupName: aws.String(group)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.client.UpdateSchedule(t.Context(), &awssched.UpdateScheduleInput{
		Name: cur.Name, GroupName: cur.GroupName, Description: cur.Description,
		ScheduleExpression:         aws.String("at(" + to.UTC().Format("2006-01-02T15:04:05") + ")"),
		ScheduleExpressionTimezone: cur.ScheduleExpressionTimezone,
		FlexibleTimeWindow:         cur.FlexibleTimeWindow, ActionAfterCompletion: cur.ActionAfterCompletion,
		State: cur.State, Target: cur.Target,
	})
	if err != nil {
		t.Fatalf("console edit: %v", err)
	}
}

// A schedule whose time an operator moved in the console — earlier or later — fires with its
// original input, naming the stored send_at. Ingest honours it: the notification is sent, the
// campaign started, then, and the stored send_at follows the fire.
func TestConsoleEditedScheduleIsHonoured(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"notification", "campaign"} {
		for _, move := range []time.Duration{-30 * time.Minute, 5 * time.Hour} {
			t.Run(fmt.Sprintf("%s moved %v", kind, move), func(t *testing.T) {
				t.Parallel()
				f := setup(t)
				db, err := sqlite.Open(filepath.Join(t.TempDir(), "h.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { db.Close() })
				box, _ := seal.New(make([]byte, 32))
				st, err := sqlite.NewStore(db, box)
				if err != nil {
					t.Fatal(err)
				}
				q, err := sqlite.NewQueue(db, []notify.QueueConfig{{Name: "prepare-realtime"}, {Name: "prepare-bulk"}}, f.clock)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(q.Close)
				log := slog.New(slog.DiscardHandler)
				p := pipeline.New(pipeline.Deps{Store: st, Queue: q, Clock: f.clock, Logger: log}, pipeline.Config{})
				runs := &startedRuns{started: map[string]bool{}}
				ctl := &campaign.Control{Steps: campaign.New(campaign.Deps{Campaigns: st, Audience: st, Notifications: st,
					Dispatcher: p, Clock: f.clock, Logger: log}, campaign.Config{}), Executions: runs, Scheduler: f.sched}
				ingest := p.IngestWithCampaigns("shop", f.sched, ctl)
				deliver := func(body []byte) error {
					if fl := ingest(t.Context(), []notify.Message{{ID: "m", Body: body}}); len(fl) > 0 {
						return fl[0].Err
					}
					return nil
				}

				sendAt := f.clock.Now().Add(time.Hour)
				var id string
				if kind == "notification" {
					body, _ := json.Marshal(notify.SendRequest{IdempotencyKey: "console", Channels: []notify.Channel{notify.ChannelPush},
						Content: notify.Content{Body: "later"}, Recipients: []notify.Recipient{{UserID: "u1"}}, SendAt: &sendAt})
					if err := deliver(body); err != nil {
						t.Fatal(err)
					}
					id = notify.NotificationIDFor("shop", "console", f.clock.Now())
				} else {
					id = "c_console"
					c := &notify.Campaign{ID: id, Service: "shop", State: notify.CampaignScheduled, SendAt: &sendAt,
						Notification: notify.Notification{Category: notify.CategoryTransactional, Channels: []notify.Channel{notify.ChannelPush},
							Content: notify.Content{Body: "hi"}},
						Audience: notify.Audience{Sources: []notify.Segment{{Kind: notify.AudienceUserList, ListID: "l"}}}}
					if _, _, err := ctl.CreateCampaign(t.Context(), c); err != nil {
						t.Fatal(err)
					}
				}
				if _, ok := f.fake.Schedule(group, id); !ok {
					t.Fatalf("no schedule armed for %s", id)
				}

				edited := sendAt.Add(move)
				consoleEdit(t, f, id, edited)
				f.clock.set(edited)
				failed := 0
				n := f.fake.Fire(edited, func(inv schedulerfake.Invocation) error {
					if err := deliver([]byte(inv.Input)); err != nil {
						failed++
						return err
					}
					return nil
				})
				if n != 1 || failed != 0 {
					t.Fatalf("fired %d (%d failed), want 1 fire, handled", n, failed)
				}

				var status string
				var stored *time.Time
				if kind == "notification" {
					got, err := st.GetNotification(t.Context(), id)
					if err != nil {
						t.Fatal(err)
					}
					status, stored = string(got.Status), got.SendAt
					if got.Status != notify.StatusProcessing {
						t.Fatalf("notification is %s after the edited fire, want PROCESSING (sent on)", got.Status)
					}
				} else {
					got, err := st.GetCampaign(t.Context(), id)
					if err != nil {
						t.Fatal(err)
					}
					status, stored = string(got.State), got.SendAt
					if started, _, _ := runs.Started(t.Context(), id, 0); !started || got.State != notify.CampaignRunning {
						t.Fatalf("campaign %s, run started %v; want RUNNING, started", got.State, started)
					}
					// Its run does not wait for the old send_at: CheckWindow runs now.
					w, err := ctl.Steps.CheckWindow(t.Context(), id)
					if err != nil || w.Action != campaign.ActionRun {
						t.Fatalf("CheckWindow = %+v, %v; want run now", w, err)
					}
				}
				if stored == nil || !stored.Equal(edited) {
					t.Fatalf("%s %s: stored send_at %v, want the fire's time %v", kind, status, stored, edited)
				}
			})
		}
	}
}

// The fire names the send_at it was armed for, in whole seconds — not the time it fires, which
// MinLead may have moved — so ingest compares it with the stored send_at exactly.
func TestFireNamesTheArmedSendAt(t *testing.T) {
	t.Parallel()
	f := setup(t)
	now := f.clock.Now()
	for id, at := range map[string]time.Time{
		"n_soon":     now.Add(10*time.Second + 300*time.Millisecond), // fires at now+MinLead
		"n_fraction": now.Add(time.Hour + 250*time.Millisecond),
	} {
		if err := f.sched.Schedule(t.Context(), id, queue, at); err != nil {
			t.Fatal(err)
		}
		sc, _ := f.fake.Schedule(group, id)
		var m notify.FireMessage
		if err := json.Unmarshal([]byte(sc.Target.Input), &m); err != nil || m.At == nil {
			t.Fatalf("%s: input %q", id, sc.Target.Input)
		}
		if want := notify.ReservedTime(at); !m.At.Equal(want) {
			t.Fatalf("%s: fire names %v, want the armed send_at %v (schedule %s)", id, m.At, want, sc.ScheduleExpression)
		}
	}
}
