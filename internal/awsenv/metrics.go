package awsenv

import (
	"context"
	"encoding/json"
	"io"
	"sort"
	"strings"
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

	// While held (an SQS batch in progress, see hold), counters add up per metric and set of
	// dimensions and are written by the last release as one line per set of dimensions: a batch
	// of ten single sends logs one Sent line, not ten — CloudWatch Logs bills every byte.
	held    int
	pending map[string]*emfGroup
	order   []string
}

// emfGroup is the held counters of one set of dimensions.
type emfGroup struct {
	dims   map[string]string
	names  []string
	values map[string]int
}

// hold starts holding counters until the matching release.
func (m *emf) hold() {
	m.mu.Lock()
	m.held++
	m.mu.Unlock()
}

// release ends a hold; the last one writes what was held.
func (m *emf) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held--; m.held > 0 {
		return
	}
	m.held = 0
	for _, k := range m.order {
		g := m.pending[k]
		m.writeLocked(g.dims, g.names, g.values)
	}
	m.pending, m.order = nil, nil
}

var _ notify.Metrics = (*emf)(nil)

func (m *emf) Add(_ context.Context, name string, value int, dims map[string]string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == 0 {
		m.writeLocked(dims, []string{name}, map[string]int{name: value})
		return
	}
	keys := make([]string, 0, len(dims))
	for k := range dims {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var id strings.Builder
	for _, k := range keys {
		id.WriteString(k + "\x00" + dims[k] + "\x00")
	}
	g, ok := m.pending[id.String()]
	if !ok {
		if m.pending == nil {
			m.pending = map[string]*emfGroup{}
		}
		g = &emfGroup{dims: dims, values: map[string]int{}}
		m.pending[id.String()] = g
		m.order = append(m.order, id.String())
	}
	if _, seen := g.values[name]; !seen {
		g.names = append(g.names, name)
	}
	g.values[name] += value
}

// writeLocked writes one line with the counters names (values) under dims.
func (m *emf) writeLocked(dims map[string]string, names []string, values map[string]int) {
	keys := []string{"Env"}
	line := map[string]any{"Env": m.env}
	for k, v := range dims {
		keys = append(keys, k)
		line[k] = v
	}
	sort.Strings(keys[1:])
	metrics := make([]any, len(names))
	for i, name := range names {
		line[name] = values[name]
		metrics[i] = map[string]string{"Name": name, "Unit": "Count"}
	}
	line["_aws"] = map[string]any{
		"Timestamp": m.now().UnixMilli(),
		"CloudWatchMetrics": []any{map[string]any{
			"Namespace":  "Herald",
			"Dimensions": [][]string{keys},
			"Metrics":    metrics,
		}},
	}
	b, err := json.Marshal(line)
	if err != nil {
		return
	}
	_, _ = m.w.Write(append(b, '\n'))
}
