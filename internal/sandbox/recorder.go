package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"
)

// Delivery is one message a fake provider accepted.
type Delivery struct {
	Seq        int64             `json:"seq"`
	Provider   string            `json:"provider"` // fcm, apns, ses, twilio, alimtalk, webpush
	Address    string            `json:"address"`  // token, email or phone, as the provider received it
	App        string            `json:"app,omitempty"`
	CollapseID string            `json:"collapse_id,omitempty"`
	Title      string            `json:"title,omitempty"`
	Body       string            `json:"body,omitempty"`
	Data       map[string]string `json:"data,omitempty"`
	MessageID  string            `json:"message_id"`
	At         time.Time         `json:"at"`
}

// Recorder keeps every accepted delivery in memory and, optionally, in an append-only file
// written with one write per delivery before the provider answers, so a SIGKILL of the process
// loses nothing that was acknowledged.
type Recorder struct {
	mu   sync.Mutex
	all  []Delivery
	f    *os.File
	next int64
}

// NewRecorder loads path (if it exists) and appends to it; path "" keeps memory only.
func NewRecorder(path string) (*Recorder, error) {
	r := &Recorder{}
	if path == "" {
		return r, nil
	}
	if err := dropTornTail(path); err != nil {
		return nil, fmt.Errorf("sandbox record file: %w", err)
	}
	if f, err := os.Open(path); err == nil {
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var d Delivery
			if json.Unmarshal(sc.Bytes(), &d) == nil { // a torn last line from a kill is skipped
				r.all = append(r.all, d)
				r.next = max(r.next, d.Seq)
			}
		}
		f.Close()
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("sandbox record file: %w", err)
	}
	r.f = f
	return r, nil
}

// dropTornTail cuts a last line that a kill left half-written (no newline at the end of the
// file) off path, so the next record starts on a line of its own instead of being glued to the
// torn one — where a later load could read neither. The torn record was never acknowledged:
// Add returns only after its whole line is written.
func dropTornTail(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || st.Size() == 0 {
		return err
	}
	buf := make([]byte, 64<<10)
	end := st.Size()
	for pos := end; pos > 0; {
		n := int64(len(buf))
		if pos < n {
			n = pos
		}
		pos -= n
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return err
		}
		if i := bytes.LastIndexByte(buf[:n], '\n'); i >= 0 {
			if cut := pos + int64(i) + 1; cut != end {
				return f.Truncate(cut)
			}
			return nil
		}
	}
	return f.Truncate(0) // one torn line and nothing else
}

// Add records d, assigning its Seq and At.
func (r *Recorder) Add(d Delivery) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	d.Seq = r.next
	if d.At.IsZero() {
		d.At = time.Now().UTC()
	}
	if r.f != nil {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		if _, err := r.f.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("sandbox record: %w", err)
		}
	}
	r.all = append(r.all, d)
	return nil
}

// List returns deliveries matching the non-empty filters, oldest first.
func (r *Recorder) List(provider, address string) []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Delivery
	for _, d := range r.all {
		if (provider == "" || d.Provider == provider) && (address == "" || d.Address == address) {
			out = append(out, d)
		}
	}
	return out
}

// Len is the number of recorded deliveries.
func (r *Recorder) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.all)
}

// Reset forgets every delivery (and truncates the file).
func (r *Recorder) Reset() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.all = nil
	if r.f != nil {
		return r.f.Truncate(0)
	}
	return nil
}

// Close closes the file.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	return err
}

// handleList serves GET /sandbox/deliveries?provider=&address=&limit=.
func (s *Server) handleList(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	list := s.Recorder.List(q.Get("provider"), q.Get("address"))
	total := len(list)
	if l, err := strconv.Atoi(q.Get("limit")); err == nil && l >= 0 && l < len(list) {
		list = list[len(list)-l:] // the newest l
	}
	if list == nil {
		list = []Delivery{}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"total": total, "deliveries": list})
}

func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	if err := s.Recorder.Reset(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
