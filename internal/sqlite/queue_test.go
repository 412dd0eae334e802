package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"herald/internal/notify"
	"herald/internal/notify/queuetest"
)

// openTestQueue opens a fresh database file and a Queue on it, closed when t ends.
func openTestQueue(t testing.TB, path string, cfgs []notify.QueueConfig) (*Queue, *DB) {
	t.Helper()
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	q, err := NewQueue(db, cfgs, notify.SystemClock{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(q.Close)
	return q, db
}

func TestQueueConformance(t *testing.T) {
	t.Parallel()
	queuetest.Run(t, queuetest.Features{}, func(t *testing.T, cfgs []notify.QueueConfig) notify.Queue {
		q, _ := openTestQueue(t, filepath.Join(t.TempDir(), "queue.db"), cfgs)
		return q
	})
}

var testQueueCfgs = []notify.QueueConfig{{Name: "work", VisibilityTimeout: 30 * time.Second, MaxReceiveCount: 3, DLQ: "work-dlq"}}

func TestQueueConfigRejected(t *testing.T) {
	t.Parallel()
	db, err := Open(filepath.Join(t.TempDir(), "queue.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, cfgs := range [][]notify.QueueConfig{
		{{Name: ""}},
		{{Name: "a"}, {Name: "a"}},
		{{Name: "a", DLQ: "a"}},
		{{Name: "a", MaxReceiveCount: -1}},
	} {
		if _, err := NewQueue(db, cfgs, nil); !notify.IsCode(err, notify.EINVALID) {
			t.Errorf("NewQueue(%+v) = %v, want EINVALID", cfgs, err)
		}
	}
	// An undeclared DLQ is registered with defaults.
	q, err := NewQueue(db, testQueueCfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if _, err := q.Stats(context.Background(), "work-dlq"); err != nil {
		t.Fatalf("Stats(work-dlq): %v", err)
	}
}

func TestQueueSurvivesReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewQueue(db, testQueueCfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Send(ctx, "work", notify.OutMessage{Body: []byte("kept"), Attributes: map[string]string{"k": "v"}}); err != nil {
		t.Fatal(err)
	}
	q.Close()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	q, _ = openTestQueue(t, path, testQueueCfgs)
	ms, err := q.Receive(ctx, "work", 10, 0, time.Second)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "kept" || ms[0].Attributes["k"] != "v" {
		t.Fatalf("after reopening: Receive = %+v, %v; want the message sent before", ms, err)
	}
}

// TestQueueSurvivesKill is the point of a durable queue: a child process sends, receives one
// message without deleting it, and is killed with SIGKILL (no Close, no checkpoint). Everything
// committed must be there afterwards, the in-flight message included once its visibility ends.
func TestQueueSurvivesKill(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestQueueKillChild$")
	cmd.Env = append(os.Environ(), "HERALD_QUEUE_KILL_DB="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child said %q, %v", line, err)
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	q, _ := openTestQueue(t, path, testQueueCfgs)
	var got []notify.Message
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < 3 && time.Now().Before(deadline) {
		ms, err := q.Receive(t.Context(), "work", 10, 0, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ms...)
	}
	counts := map[string]int{}
	for _, m := range got {
		counts[string(m.Body)] = m.ReceiveCount
	}
	want := map[string]int{"k0": 2, "k1": 1, "k2": 1} // k0 was in flight when the child died
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Fatalf("after the kill: body → ReceiveCount %v, want %v", counts, want)
	}
}

// TestQueueKillChild is the child of TestQueueSurvivesKill; on its own it does nothing.
func TestQueueKillChild(t *testing.T) {
	path := os.Getenv("HERALD_QUEUE_KILL_DB")
	if path == "" {
		t.Skip("child of TestQueueSurvivesKill")
	}
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	q, err := NewQueue(db, testQueueCfgs, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i := range 3 {
		if err := q.Send(ctx, "work", notify.OutMessage{Body: fmt.Appendf(nil, "k%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if ms, err := q.Receive(ctx, "work", 1, time.Second, 0); err != nil || len(ms) != 1 {
		t.Fatalf("child Receive = %d, %v", len(ms), err)
	}
	fmt.Println("ready")
	time.Sleep(30 * time.Second) // killed long before this
	os.Exit(1)
}

// TestQueueWakesWithinMilliseconds checks the in-process wake-up: a Receive waiting on an empty
// queue returns soon after a Send, not at the next fallback poll.
func TestQueueWakesWithinMilliseconds(t *testing.T) {
	t.Parallel()
	q, _ := openTestQueue(t, filepath.Join(t.TempDir(), "queue.db"), testQueueCfgs)
	ctx := t.Context()
	var worst time.Duration
	for range 10 {
		received := make(chan time.Time, 1)
		go func() {
			ms, err := q.Receive(ctx, "work", 10, 0, 5*time.Second)
			if err != nil || len(ms) != 1 {
				received <- time.Time{}
				return
			}
			received <- time.Now()
			_ = q.Delete(ctx, "work", ms[0].ReceiptHandle)
		}()
		time.Sleep(20 * time.Millisecond) // let it start waiting
		sent := time.Now()
		if err := q.Send(ctx, "work", notify.OutMessage{Body: []byte("ping")}); err != nil {
			t.Fatal(err)
		}
		at := <-received
		if at.IsZero() {
			t.Fatal("waiting Receive failed")
		}
		worst = max(worst, at.Sub(sent))
	}
	// The fallback poll is 250 ms; anything near it means the signal path did not work.
	if worst > 100*time.Millisecond {
		t.Errorf("worst wake-up after Send took %s", worst)
	}
	t.Logf("worst wake-up after Send (including the send's commit): %s", worst)
}

// BenchmarkQueueThroughput measures the worker cycle the local runtime runs: send a batch of
// 10, receive 10, delete each — by one worker ("serial") and by 8 concurrent workers as a pool
// runs them ("workers8"), where concurrent Deletes share commits.
func BenchmarkQueueThroughput(b *testing.B) {
	batch := make([]notify.OutMessage, 10)
	for i := range batch {
		batch[i] = notify.OutMessage{Body: []byte(`{"notification_id":"n_0123456789","delivery":"d_0123456789","channel":"push"}`),
			GroupID: "svc", Attributes: map[string]string{"kind": "send"}}
	}
	cycle := func(b *testing.B, q *Queue) int {
		ctx := context.Background()
		if err := q.Send(ctx, "work", batch...); err != nil {
			b.Fatal(err)
		}
		ms, err := q.Receive(ctx, "work", 10, 0, 0)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range ms {
			if err := q.Delete(ctx, "work", m.ReceiptHandle); err != nil {
				b.Fatal(err)
			}
		}
		return len(ms)
	}
	b.Run("serial", func(b *testing.B) {
		q, _ := openTestQueue(b, filepath.Join(b.TempDir(), "queue.db"), testQueueCfgs)
		msgs := 0
		for b.Loop() {
			msgs += cycle(b, q)
		}
		b.ReportMetric(float64(msgs)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("workers8", func(b *testing.B) {
		q, _ := openTestQueue(b, filepath.Join(b.TempDir(), "queue.db"), testQueueCfgs)
		var msgs atomic.Int64
		b.SetParallelism(max(1, 8/runtime.GOMAXPROCS(0)))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				msgs.Add(int64(cycle(b, q)))
			}
		})
		b.ReportMetric(float64(msgs.Load())/b.Elapsed().Seconds(), "msgs/s")
	})
}

// TestQueueReportsDeadLetters: a message that uses up its receives is moved to the DLQ by the
// queue itself and reported once through OnDeadLetter, with the receives it really had.
func TestQueueReportsDeadLetters(t *testing.T) {
	t.Parallel()
	q, _ := openTestQueue(t, filepath.Join(t.TempDir(), "queue.db"), testQueueCfgs)
	type report struct {
		queue, id string
		receives  int
	}
	var got []report
	q.OnDeadLetter = func(queue string, m notify.Message) { got = append(got, report{queue, m.ID, m.ReceiveCount}) }
	ctx := context.Background()
	if err := q.Send(ctx, "work", notify.OutMessage{Body: []byte(`{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	var id string
	for i := range 3 {
		msgs, err := q.Receive(ctx, "work", 1, time.Millisecond, 0)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("receive %d = %v %v", i, msgs, err)
		}
		id = msgs[0].ID
		time.Sleep(5 * time.Millisecond)
	}
	if len(got) != 0 {
		t.Fatalf("reported before the receives ran out: %v", got)
	}
	if msgs, err := q.Receive(ctx, "work", 1, time.Millisecond, 0); err != nil || len(msgs) != 0 {
		t.Fatalf("fourth receive = %v %v", msgs, err)
	}
	if len(got) != 1 || got[0] != (report{"work", id, 3}) {
		t.Fatalf("reported %v, want one of work/%s after 3 receives", got, id)
	}
}

// TestQueueReceiveKeepsTheBody: receiving a message rewrites only the pages its new receipt,
// count and visibility land on, never its body: every receipt is stored in the same 8 bytes as
// the one a sent message starts with, so SQLite overwrites the row in place (see
// queueNoReceipt). Counted in WAL frames written by one receive of a 256 KiB message: 64 and
// more if the body were written again. Receipt handles stay odd, so a forged handle with the
// "no receipt" value is refused.
func TestQueueReceiveKeepsTheBody(t *testing.T) {
	t.Parallel()
	q, db := openTestQueue(t, filepath.Join(t.TempDir(), "queue.db"), testQueueCfgs)
	ctx := t.Context()
	if err := q.Send(ctx, "work", notify.OutMessage{Body: bytes.Repeat([]byte("x"), 256<<10)}); err != nil {
		t.Fatal(err)
	}
	walFrames := func() int {
		t.Helper()
		var busy, frames, copied int
		if err := db.W.QueryRowContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`).Scan(&busy, &frames, &copied); err != nil {
			t.Fatal(err)
		}
		return frames
	}
	if _, err := db.W.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	if n := walFrames(); n != 0 {
		t.Fatalf("WAL holds %d frames after truncating", n)
	}
	ms, err := q.Receive(ctx, "work", 1, 0, 0)
	if err != nil || len(ms) != 1 {
		t.Fatalf("received %d: %v", len(ms), err)
	}
	n := walFrames()
	t.Logf("one receive of a 256 KiB message wrote %d WAL frames", n)
	if n > 8 {
		t.Errorf("one receive wrote %d WAL frames (pages): the body was written again", n)
	}
	seq, _, err := queueParseReceipt(ms[0].ReceiptHandle)
	if err != nil {
		t.Fatal(err)
	}
	forged := queueReceipt(seq, queueNoReceipt) // what a message holds while nobody has it
	if err := q.Delete(ctx, "work", forged); !notify.IsCode(err, notify.EINVALID) {
		t.Errorf("Delete with a forged even receipt: %v, want EINVALID", err)
	}
	if err := q.Delete(ctx, "work", ms[0].ReceiptHandle); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkQueueReceiveLarge: receiving a large message (a send batch of 500 tokens is about
// 35 KB, a prepare message up to a few hundred) is a write on the queue's one writer; it
// prints the receive's time alone, the send and delete around it apart.
func BenchmarkQueueReceiveLarge(b *testing.B) {
	for _, size := range []int{32 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			q, _ := openTestQueue(b, filepath.Join(b.TempDir(), "queue.db"), testQueueCfgs)
			ctx := context.Background()
			body := bytes.Repeat([]byte("x"), size)
			var receiving time.Duration
			for b.Loop() {
				if err := q.Send(ctx, "work", notify.OutMessage{Body: body}); err != nil {
					b.Fatal(err)
				}
				start := time.Now()
				ms, err := q.Receive(ctx, "work", 1, 0, 0)
				receiving += time.Since(start)
				if err != nil || len(ms) != 1 {
					b.Fatalf("received %d: %v", len(ms), err)
				}
				if err := q.Delete(ctx, "work", ms[0].ReceiptHandle); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(receiving.Microseconds())/float64(b.N), "µs/receive")
		})
	}
}

// What a killed process left in flight comes back at once on ReleaseInFlight; what
// ChangeVisibility held and what was sent with a delay keep their time; the receive counts
// stay, so a message that kills its process each time still ends in its DLQ.
func TestQueueReleaseInFlight(t *testing.T) {
	t.Parallel()
	q, db := openTestQueue(t, filepath.Join(t.TempDir(), "queue.db"), testQueueCfgs)
	ctx := t.Context()
	for _, body := range []string{"in-flight", "held", "acked", "delayed", "waiting"} {
		m := notify.OutMessage{Body: []byte(body), Attributes: map[string]string{"body": body}}
		if body == "delayed" {
			m.Delay = time.Minute
		}
		if err := q.Send(ctx, "work", m); err != nil {
			t.Fatal(err)
		}
	}
	got, err := q.Receive(ctx, "work", 3, time.Hour, 0) // in-flight, held, acked
	if err != nil || len(got) != 3 {
		t.Fatalf("received %d: %v", len(got), err)
	}
	byBody := map[string]notify.Message{}
	for _, m := range got {
		byBody[string(m.Body)] = m
	}
	if err := q.ChangeVisibility(ctx, "work", byBody["held"].ReceiptHandle, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := q.Delete(ctx, "work", byBody["acked"].ReceiptHandle); err != nil {
		t.Fatal(err)
	}

	// The process "dies"; the next one, alone on the file, releases what was in flight.
	rel, err := q.ReleaseInFlight(ctx)
	if err != nil || len(rel) != 1 || rel[0].Queue != "work" || string(rel[0].Body) != "in-flight" ||
		rel[0].Attributes["body"] != "in-flight" || rel[0].ReceiveCount != 1 {
		t.Fatalf("ReleaseInFlight = %+v, %v; want the one received message nobody held", rel, err)
	}
	if err := q.ChangeVisibility(ctx, "work", byBody["in-flight"].ReceiptHandle, time.Hour); !notify.IsCode(err, notify.ECONFLICT) {
		t.Fatalf("the dead receiver's receipt after the release: %v, want ECONFLICT (stale)", err)
	}
	again, err := q.Receive(ctx, "work", 10, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	var bodies []string
	for _, m := range again {
		bodies = append(bodies, string(m.Body))
		if string(m.Body) == "in-flight" && m.ReceiveCount != 2 {
			t.Errorf("released message received again with count %d, want 2: the dead receive still counts", m.ReceiveCount)
		}
	}
	slices.Sort(bodies)
	if want := []string{"in-flight", "waiting"}; !slices.Equal(bodies, want) {
		t.Fatalf("visible after the release: %q, want %q (held and delayed keep their time)", bodies, want)
	}
	if rel, err := q.ReleaseInFlight(ctx); err != nil || len(rel) != 2 {
		t.Fatalf("ReleaseInFlight after a second receive = %d, %v; want the 2 just received", len(rel), err)
	}
	var held int
	if err := db.R.QueryRowContext(ctx, `SELECT count(*) FROM queue_messages WHERE held = 1`).Scan(&held); err != nil || held != 1 {
		t.Fatalf("held rows = %d, %v; want 1", held, err)
	}
}

// A queue file from before the held column gets it, and its messages keep working.
func TestQueueAddsTheHeldColumn(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "queue.db")
	db, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	old := strings.Replace(queueSchema, "DEFAULT '', -- in a DLQ", "DEFAULT ''  -- in a DLQ", 1)
	old = strings.Replace(old, "\n\theld          INTEGER NOT NULL DEFAULT 0", "\n\t--", 1)
	if old == queueSchema {
		t.Fatal("the schema's held column was not found to take out")
	}
	if _, err := db.W.ExecContext(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := db.W.ExecContext(ctx, `INSERT INTO queue_messages (id, queue, body, sent_at, visible_at, receive_count, receipt)
		VALUES ('m1', 'work', 'old', 0, 0, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	q, _ := openTestQueue(t, path, testQueueCfgs)
	ms, err := q.Receive(ctx, "work", 1, time.Hour, 0)
	if err != nil || len(ms) != 1 || string(ms[0].Body) != "old" {
		t.Fatalf("receive from the old file: %v, %v", ms, err)
	}
	if rel, err := q.ReleaseInFlight(ctx); err != nil || len(rel) != 1 {
		t.Fatalf("ReleaseInFlight = %d, %v; want 1", len(rel), err)
	}
}
