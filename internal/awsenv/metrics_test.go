package awsenv

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"
)

func TestEMFLine(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := &emf{w: &buf, env: "prod", now: func() time.Time { return time.UnixMilli(1796029200000) }}
	m.Add(context.Background(), "Sent", 500, map[string]string{"Provider": "fcm"})
	var got map[string]any
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := `{"Env":"prod","Provider":"fcm","Sent":500,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Env","Provider"]],"Metrics":[{"Name":"Sent","Unit":"Count"}],"Namespace":"Herald"}],"Timestamp":1796029200000}}`
	if b, _ := json.Marshal(got); string(b) != want {
		t.Fatalf("EMF line\n%s\nwant\n%s", b, want)
	}
}

// While an SQS batch is in progress counters add up, and its end writes one line per set of
// dimensions with every metric of that set.
func TestEMFHeldCountersAreOneLinePerDimensions(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	m := &emf{w: &buf, env: "prod", now: func() time.Time { return time.UnixMilli(1796029200000) }}
	ctx := context.Background()
	m.hold()
	for range 10 {
		m.Add(ctx, "Sent", 1, map[string]string{"Provider": "fcm"})
	}
	m.Add(ctx, "Failed", 2, map[string]string{"Provider": "fcm"})
	m.Add(ctx, "Sent", 3, map[string]string{"Provider": "ses"})
	m.Add(ctx, "Express", 10, nil)
	if buf.Len() != 0 {
		t.Fatalf("wrote while held: %s", buf.String())
	}
	m.release()
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	want := []string{
		`{"Env":"prod","Failed":2,"Provider":"fcm","Sent":10,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Env","Provider"]],"Metrics":[{"Name":"Sent","Unit":"Count"},{"Name":"Failed","Unit":"Count"}],"Namespace":"Herald"}],"Timestamp":1796029200000}}`,
		`{"Env":"prod","Provider":"ses","Sent":3,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Env","Provider"]],"Metrics":[{"Name":"Sent","Unit":"Count"}],"Namespace":"Herald"}],"Timestamp":1796029200000}}`,
		`{"Env":"prod","Express":10,"_aws":{"CloudWatchMetrics":[{"Dimensions":[["Env"]],"Metrics":[{"Name":"Express","Unit":"Count"}],"Namespace":"Herald"}],"Timestamp":1796029200000}}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i, l := range lines {
		var got map[string]any
		if err := json.Unmarshal(l, &got); err != nil {
			t.Fatal(err)
		}
		if b, _ := json.Marshal(got); string(b) != want[i] {
			t.Errorf("line %d\n%s\nwant\n%s", i, b, want[i])
		}
	}
	// Released, it writes at once again.
	buf.Reset()
	m.Add(ctx, "Sent", 1, nil)
	if bytes.Count(buf.Bytes(), []byte("\n")) != 1 {
		t.Fatalf("after release: %q", buf.String())
	}
}
