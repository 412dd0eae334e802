// Package eventbusfake is an in-memory Amazon EventBridge speaking PutEvents in the service's
// JSON 1.1 protocol (X-Amz-Target: AWSEvents.PutEvents) over httptest, so the real
// aws-sdk-go-v2 client can be tested against it. It records every accepted entry and can be
// told to fail the next entries (FailedEntryCount, as the service reports a partial failure)
// or the next calls (an error response).
package eventbusfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Entry is an accepted PutEvents entry, in the service's field names.
type Entry struct {
	EventBusName string
	Source       string
	DetailType   string
	Detail       string
	Time         time.Time // zero when the entry had none
	Resources    []string
	EventID      string
}

// Fake is the service. Its zero value is not usable; call New.
type Fake struct {
	mu          sync.Mutex
	entries     []Entry
	failEntries []string // error codes for the next entries, in order
	failCalls   []string // error types for the next calls, in order
	seq         int
}

// New returns an empty fake; serve it with httptest.NewServer.
func New() *Fake { return &Fake{} }

// Entries returns the accepted entries in arrival order.
func (f *Fake) Entries() []Entry {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Entry(nil), f.entries...)
}

// FailEntries makes the next len(codes) entries fail, each with its code (e.g.
// "ThrottlingException", "InternalFailure"), reported through FailedEntryCount.
func (f *Fake) FailEntries(codes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failEntries = append(f.failEntries, codes...)
}

// FailCalls makes the next len(types) PutEvents calls fail with an HTTP 400 error of that type
// (e.g. "AccessDeniedException").
func (f *Fake) FailCalls(types ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failCalls = append(f.failCalls, types...)
}

type wireEntry struct {
	EventBusName string
	Source       string
	DetailType   string
	Detail       string
	Time         *float64 // epoch seconds
	Resources    []string
}

type resultEntry struct {
	EventId      string `json:",omitempty"`
	ErrorCode    string `json:",omitempty"`
	ErrorMessage string `json:",omitempty"`
}

func (f *Fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" ||
		!strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-amz-json-1.1") {
		writeError(w, "UnknownOperationException", fmt.Sprintf("eventbusfake serves only AWSEvents.PutEvents (JSON 1.1), not %s %q",
			r.Method, r.Header.Get("X-Amz-Target")))
		return
	}
	var in struct{ Entries []wireEntry }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		writeError(w, "SerializationException", err.Error())
		return
	}
	if len(in.Entries) == 0 || len(in.Entries) > 10 {
		writeError(w, "ValidationException", fmt.Sprintf("%d entries; PutEvents takes 1 to 10", len(in.Entries)))
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.failCalls) > 0 {
		t := f.failCalls[0]
		f.failCalls = f.failCalls[1:]
		writeError(w, t, "eventbusfake: failing this call as told")
		return
	}
	out := struct {
		FailedEntryCount int
		Entries          []resultEntry
	}{}
	for _, e := range in.Entries {
		if e.Source == "" || e.DetailType == "" || !json.Valid([]byte(e.Detail)) {
			out.FailedEntryCount++
			out.Entries = append(out.Entries, resultEntry{ErrorCode: "MalformedDetail",
				ErrorMessage: "Source, DetailType and a JSON object Detail are required"})
			continue
		}
		if len(f.failEntries) > 0 {
			code := f.failEntries[0]
			f.failEntries = f.failEntries[1:]
			out.FailedEntryCount++
			out.Entries = append(out.Entries, resultEntry{ErrorCode: code, ErrorMessage: "eventbusfake: failing this entry as told"})
			continue
		}
		f.seq++
		stored := Entry{EventBusName: e.EventBusName, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail,
			Resources: e.Resources, EventID: fmt.Sprintf("00000000-0000-0000-0000-%012d", f.seq)}
		if stored.EventBusName == "" {
			stored.EventBusName = "default"
		}
		if e.Time != nil {
			sec := int64(*e.Time)
			stored.Time = time.Unix(sec, int64((*e.Time-float64(sec))*1e9)).UTC()
		}
		f.entries = append(f.entries, stored)
		out.Entries = append(out.Entries, resultEntry{EventId: stored.EventID})
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

func writeError(w http.ResponseWriter, typ, msg string) {
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.Header().Set("X-Amzn-Errortype", typ)
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}
