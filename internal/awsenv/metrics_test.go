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
