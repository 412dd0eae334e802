package awsenv

import (
	"context"
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"

	"herald/internal/notify"
)

// emf writes counters as CloudWatch embedded-metric-format lines on the function's output, which
// Lambda turns into metrics in the Herald namespace without an API call per batch.
type emf struct {
	mu  sync.Mutex
	w   io.Writer
	env string
	now func() time.Time
}

var _ notify.Metrics = (*emf)(nil)

func (m *emf) Add(_ context.Context, name string, value int, dims map[string]string) {
	keys := []string{"Env"}
	line := map[string]any{"Env": m.env, name: value}
	for k, v := range dims {
		keys = append(keys, k)
		line[k] = v
	}
	sort.Strings(keys[1:])
	line["_aws"] = map[string]any{
		"Timestamp": m.now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  "Herald",
			"Dimensions": [][]string{keys},
			"Metrics":    []any{map[string]string{"Name": name, "Unit": "Count"}},
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.w.Write(append(b, '\n'))
}
