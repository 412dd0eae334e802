package run

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Mappings is the box's Lambda control plane for event source mappings: GetEventSourceMapping
// and UpdateEventSourceMapping's Enabled flag, which the pollers honour (an operator pausing a
// queue's consumers). Every call is authorized on arn:…:event-source-mapping:<UUID>, with
// lambda:FunctionArn when the update names a function.
type Mappings struct {
	mu   sync.Mutex
	byID map[string]*mappingState
}

type mappingState struct {
	uuid, function, queue string
	enabled               atomic.Bool
}

func (ms *Mappings) add(uuid, functionARN, queueARN string) *mappingState {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.byID == nil {
		ms.byID = map[string]*mappingState{}
	}
	s := &mappingState{uuid: uuid, function: functionARN, queue: queueARN}
	s.enabled.Store(true)
	ms.byID[uuid] = s
	return s
}

func (ms *Mappings) get(uuid string) *mappingState {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.byID[uuid]
}

const mappingsPath = "/2015-03-31/event-source-mappings/"

// ServeHTTP answers GET and PUT /2015-03-31/event-source-mappings/{UUID} as Lambda's REST API.
func (ms *Mappings) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id, ok := strings.CutPrefix(r.URL.Path, mappingsPath)
	s := ms.get(id)
	if !ok || s == nil {
		w.Header().Set("X-Amzn-ErrorType", "ResourceNotFoundException")
		http.Error(w, `{"Type":"User","message":"The resource you requested does not exist."}`, http.StatusNotFound)
		return
	}
	state := func() string {
		if s.enabled.Load() {
			return "Enabled"
		}
		return "Disabled"
	}
	switch r.Method {
	case http.MethodGet:
	case http.MethodPut:
		var in struct{ Enabled *bool }
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
			w.Header().Set("X-Amzn-ErrorType", "InvalidParameterValueException")
			http.Error(w, `{"Type":"User","message":"unreadable body"}`, http.StatusBadRequest)
			return
		}
		if in.Enabled != nil {
			s.enabled.Store(*in.Enabled)
		}
	default:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"UUID": s.uuid, "FunctionArn": s.function, "EventSourceArn": s.queue, "State": state()})
}

// lambdaRequests maps a call of the event source mapping API to its IAM action and resource.
func (b *Box) lambdaRequests(r *http.Request, body []byte) ([]authz, error) {
	id, ok := strings.CutPrefix(r.URL.Path, mappingsPath)
	if !ok || id == "" || strings.Contains(id, "/") {
		return nil, fmt.Errorf("lambda: %s %s", r.Method, r.URL.Path)
	}
	a := authz{Resource: b.arn("lambda", "event-source-mapping:"+id)}
	switch r.Method {
	case http.MethodGet:
		a.Action = "lambda:GetEventSourceMapping"
	case http.MethodPut:
		a.Action = "lambda:UpdateEventSourceMapping"
		var in struct{ FunctionName string }
		if len(body) > 0 && json.Unmarshal(body, &in) == nil && in.FunctionName != "" {
			fn := in.FunctionName
			if !strings.HasPrefix(fn, "arn:") {
				fn = b.arn("lambda", "function:"+fn)
			}
			a.Context = map[string]string{"lambda:FunctionArn": fn}
		}
	default:
		return nil, fmt.Errorf("lambda: %s %s", r.Method, r.URL.Path)
	}
	return []authz{a}, nil
}
