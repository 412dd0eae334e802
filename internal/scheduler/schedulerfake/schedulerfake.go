// Package schedulerfake is an in-memory EventBridge Scheduler speaking the service's REST-JSON
// protocol over httptest, so the real aws-sdk-go-v2 client can be tested against it (no
// emulator of the service exists). It serves CreateSchedule, GetSchedule, UpdateSchedule,
// DeleteSchedule and CreateScheduleGroup with the service's validation of one-time schedules
// and its error shapes (ConflictException, ResourceNotFoundException, ValidationException), and
// Fire plays the service's clock: it invokes due schedules' targets through a callback, retries
// failed invocations on later calls up to the retry policy, dead-letters them after that, and
// applies ActionAfterCompletion.
//
// Only one-time at() schedules are supported; rate() and cron() are refused with a
// ValidationException naming the fake, rather than stored and never fired.
package schedulerfake

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
)

// Account and region the fake's ARNs name.
const (
	Region  = "us-east-1"
	Account = "123456789012"
)

// Schedule is a stored schedule, in the service's field names.
type Schedule struct {
	GroupName                  string
	Name                       string
	Arn                        string
	Description                string
	ScheduleExpression         string
	ScheduleExpressionTimezone string
	State                      string // ENABLED or DISABLED
	ActionAfterCompletion      string // NONE or DELETE
	FlexibleTimeWindow         FlexibleTimeWindow
	Target                     Target
	CreationDate               time.Time
	LastModificationDate       time.Time

	at        time.Time // the instant the at() expression names
	attempts  int       // failed invocations so far
	completed bool      // fired (ActionAfterCompletion NONE keeps it)
	version   int       // unique per write, so Fire never completes a schedule rewritten meanwhile
}

// FlexibleTimeWindow is the schedule's flexible time window.
type FlexibleTimeWindow struct {
	Mode                   string // OFF or FLEXIBLE
	MaximumWindowInMinutes *int32 `json:",omitempty"`
}

// Target is what a schedule invokes (the fields a queue target uses).
type Target struct {
	Arn              string
	RoleArn          string
	Input            string            `json:",omitempty"`
	RetryPolicy      *RetryPolicy      `json:",omitempty"`
	DeadLetterConfig *DeadLetterConfig `json:",omitempty"`
}

// RetryPolicy bounds the retries of a failed invocation.
type RetryPolicy struct {
	MaximumEventAgeInSeconds *int32 `json:",omitempty"`
	MaximumRetryAttempts     *int32 `json:",omitempty"`
}

// DeadLetterConfig names the queue failed invocations go to.
type DeadLetterConfig struct {
	Arn string
}

// Invocation is one delivery of a schedule's target: what the service would send to the target
// (Input) on behalf of RoleArn.
type Invocation struct {
	GroupName    string
	ScheduleName string
	ScheduleArn  string
	TargetArn    string
	RoleArn      string
	Input        string
	Attempt      int // 1 for the first try
}

// Options configure a Server.
type Options struct {
	// Now is the service's clock: at() in the past is refused against it; default time.Now.
	Now func() time.Time
	// Groups are schedule groups that exist besides "default".
	Groups []string
}

// Server is a running fake.
type Server struct {
	URL string // the SDK's BaseEndpoint

	srv *httptest.Server
	now func() time.Time

	mu     sync.Mutex
	groups map[string]map[string]*Schedule // group → name → schedule
	dead   []Invocation                    // invocations sent to a DLQ
	calls  map[string]int                  // operation → requests served
	writes int                             // schedule writes so far: the source of versions
	inject map[string][]apiError           // operation → errors to answer next
}

// New starts a fake; Close stops it.
func New(opts Options) *Server {
	s := &Server{
		now:    opts.Now,
		groups: map[string]map[string]*Schedule{"default": {}},
		calls:  map[string]int{},
		inject: map[string][]apiError{},
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, g := range opts.Groups {
		s.groups[g] = map[string]*Schedule{}
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /schedules/{Name}", s.op("CreateSchedule", s.createSchedule))
	mux.HandleFunc("GET /schedules/{Name}", s.op("GetSchedule", s.getSchedule))
	mux.HandleFunc("PUT /schedules/{Name}", s.op("UpdateSchedule", s.updateSchedule))
	mux.HandleFunc("DELETE /schedules/{Name}", s.op("DeleteSchedule", s.deleteSchedule))
	mux.HandleFunc("POST /schedule-groups/{Name}", s.op("CreateScheduleGroup", s.createGroup))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, apiError{http.StatusNotFound, "UnknownOperationException", "schedulerfake does not serve " + r.Method + " " + r.URL.Path})
	})
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	return s
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// CreateGroup adds a schedule group (as CreateScheduleGroup does).
func (s *Server) CreateGroup(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.groups[name] == nil {
		s.groups[name] = map[string]*Schedule{}
	}
}

// Schedule returns a copy of a stored schedule.
func (s *Server) Schedule(group, name string) (Schedule, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.groups[group][name]
	if !ok {
		return Schedule{}, false
	}
	return *sc, true
}

// Schedules returns copies of the group's schedules in name order.
func (s *Server) Schedules(group string) []Schedule {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Schedule
	for _, sc := range s.groups[group] {
		out = append(out, *sc)
	}
	slices.SortFunc(out, func(a, b Schedule) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// DeadLetters returns the invocations that ran out of retries, oldest first.
func (s *Server) DeadLetters() []Invocation {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.dead)
}

// Calls returns how many requests of an operation ("CreateSchedule", ...) were served,
// including injected failures.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// FailNext makes the next request of op fail with the given status and error code (e.g. 429
// "ThrottlingException"), before the fake looks at the request. Calls queue up.
func (s *Server) FailNext(op string, status int, code, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inject[op] = append(s.inject[op], apiError{status, code, message})
}

// Fire invokes every enabled schedule due at now, in order of due time, through invoke (called
// without the fake's lock held, so it may call the API). A nil error completes the schedule —
// deleted for ActionAfterCompletion DELETE, kept but spent for NONE. An error counts as a failed
// attempt: the schedule is tried again by a later Fire until its retry policy (attempts or event
// age) is exhausted, then the invocation is dead-lettered and the schedule completes. A schedule
// written while its invocation was running keeps its new definition. Returns how many
// invocations succeeded.
func (s *Server) Fire(now time.Time, invoke func(Invocation) error) int {
	type due struct {
		inv     Invocation
		version int
		at      time.Time
	}
	s.mu.Lock()
	var list []due
	for group, schedules := range s.groups {
		for _, sc := range schedules {
			if sc.State != "ENABLED" || sc.completed || sc.at.After(now) {
				continue
			}
			list = append(list, due{version: sc.version, at: sc.at, inv: Invocation{
				GroupName: group, ScheduleName: sc.Name, ScheduleArn: sc.Arn,
				TargetArn: sc.Target.Arn, RoleArn: sc.Target.RoleArn, Input: sc.Target.Input,
				Attempt: sc.attempts + 1,
			}})
		}
	}
	s.mu.Unlock()
	slices.SortFunc(list, func(a, b due) int {
		return cmp.Or(a.at.Compare(b.at), cmp.Compare(a.inv.GroupName, b.inv.GroupName), cmp.Compare(a.inv.ScheduleName, b.inv.ScheduleName))
	})

	fired := 0
	for _, d := range list {
		err := invoke(d.inv)
		s.mu.Lock()
		sc, ok := s.groups[d.inv.GroupName][d.inv.ScheduleName]
		if ok && sc.version == d.version {
			done := err == nil
			if err != nil {
				sc.attempts++
				if exhausted(sc, now) {
					dl := d.inv
					if sc.Target.DeadLetterConfig != nil {
						dl.TargetArn = sc.Target.DeadLetterConfig.Arn
					}
					s.dead = append(s.dead, dl)
					done = true
				}
			}
			if done {
				sc.completed = true
				if sc.ActionAfterCompletion == "DELETE" {
					delete(s.groups[d.inv.GroupName], d.inv.ScheduleName)
				}
			}
		}
		s.mu.Unlock()
		if err == nil {
			fired++
		}
	}
	return fired
}

// exhausted reports whether sc's retry policy allows no further attempt (service defaults: 185
// retries, 24 h).
func exhausted(sc *Schedule, now time.Time) bool {
	retries, age := int32(185), int32(86400)
	if p := sc.Target.RetryPolicy; p != nil {
		if p.MaximumRetryAttempts != nil {
			retries = *p.MaximumRetryAttempts
		}
		if p.MaximumEventAgeInSeconds != nil {
			age = *p.MaximumEventAgeInSeconds
		}
	}
	return sc.attempts > int(retries) || now.Sub(sc.at) >= time.Duration(age)*time.Second
}

// apiError is an error answer in the shape the SDK deserializes: the code in X-Amzn-ErrorType,
// the message in the JSON body.
type apiError struct {
	status  int
	code    string
	message string
}

func writeError(w http.ResponseWriter, e apiError) {
	w.Header().Set("X-Amzn-ErrorType", e.code)
	writeJSON(w, e.status, map[string]string{"Message": e.message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-RequestId", fmt.Sprintf("fake-%d", time.Now().UnixNano()))
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// op counts a request, answers an injected failure if one is queued, and otherwise runs h with
// the fake's lock held.
func (s *Server) op(name string, h func(r *http.Request) (any, *apiError)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.calls[name]++
		if q := s.inject[name]; len(q) > 0 {
			s.inject[name] = q[1:]
			s.mu.Unlock()
			writeError(w, q[0])
			return
		}
		out, e := h(r)
		s.mu.Unlock()
		if e != nil {
			writeError(w, *e)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

func validation(format string, args ...any) *apiError {
	return &apiError{http.StatusBadRequest, "ValidationException", fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...any) *apiError {
	return &apiError{http.StatusNotFound, "ResourceNotFoundException", fmt.Sprintf(format, args...)}
}

// scheduleBody is the JSON body of CreateSchedule and UpdateSchedule.
type scheduleBody struct {
	ActionAfterCompletion      string
	ClientToken                string
	Description                string
	EndDate                    *float64
	FlexibleTimeWindow         *FlexibleTimeWindow
	GroupName                  string
	KmsKeyArn                  string
	ScheduleExpression         string
	ScheduleExpressionTimezone string
	StartDate                  *float64
	State                      string
	Target                     *Target
}

func (s *Server) createSchedule(r *http.Request) (any, *apiError) {
	return s.putSchedule(r, true)
}

func (s *Server) updateSchedule(r *http.Request) (any, *apiError) {
	return s.putSchedule(r, false)
}

// putSchedule creates (create) or replaces a schedule with the request's whole definition: like
// the service, an update does not merge, so a field left out is reset to its default.
func (s *Server) putSchedule(r *http.Request, create bool) (any, *apiError) {
	name := r.PathValue("Name")
	var b scheduleBody
	if err := json.NewDecoder(r.Body).Decode(&b); err != nil {
		return nil, validation("malformed request body: %v", err)
	}
	sc, e := s.validate(name, b)
	if e != nil {
		return nil, e
	}
	schedules, ok := s.groups[sc.GroupName]
	if !ok {
		return nil, notFound("Schedule group %s does not exist.", sc.GroupName)
	}
	old, exists := schedules[name]
	now := s.now()
	switch {
	case create && exists:
		return nil, &apiError{http.StatusConflict, "ConflictException", fmt.Sprintf("Schedule %s already exists.", name)}
	case !create && !exists:
		return nil, notFound("Schedule %s does not exist.", name)
	case exists:
		sc.CreationDate = old.CreationDate
	default:
		sc.CreationDate = now
	}
	s.writes++
	sc.version = s.writes
	sc.LastModificationDate = now
	schedules[name] = sc
	return map[string]string{"ScheduleArn": sc.Arn}, nil
}

// validate checks a definition as the service does for a one-time schedule.
func (s *Server) validate(name string, b scheduleBody) (*Schedule, *apiError) {
	if !validName(name) {
		return nil, validation("Name %q must match [0-9a-zA-Z-_.]{1,64}.", name)
	}
	sc := &Schedule{
		GroupName: cmp.Or(b.GroupName, "default"), Name: name, Description: b.Description,
		ScheduleExpression: b.ScheduleExpression, ScheduleExpressionTimezone: cmp.Or(b.ScheduleExpressionTimezone, "UTC"),
		State: cmp.Or(b.State, "ENABLED"), ActionAfterCompletion: cmp.Or(b.ActionAfterCompletion, "NONE"),
	}
	sc.Arn = fmt.Sprintf("arn:aws:scheduler:%s:%s:schedule/%s/%s", Region, Account, sc.GroupName, name)
	if len(b.Description) > 512 {
		return nil, validation("Description is longer than 512 characters.")
	}
	if sc.State != "ENABLED" && sc.State != "DISABLED" {
		return nil, validation("State %q must be ENABLED or DISABLED.", sc.State)
	}
	if sc.ActionAfterCompletion != "NONE" && sc.ActionAfterCompletion != "DELETE" {
		return nil, validation("ActionAfterCompletion %q must be NONE or DELETE.", sc.ActionAfterCompletion)
	}
	if b.FlexibleTimeWindow == nil {
		return nil, validation("FlexibleTimeWindow is required.")
	}
	sc.FlexibleTimeWindow = *b.FlexibleTimeWindow
	switch w := sc.FlexibleTimeWindow; w.Mode {
	case "OFF":
		if w.MaximumWindowInMinutes != nil {
			return nil, validation("MaximumWindowInMinutes is not allowed when Mode is OFF.")
		}
	case "FLEXIBLE":
		if w.MaximumWindowInMinutes == nil || *w.MaximumWindowInMinutes < 1 || *w.MaximumWindowInMinutes > 1440 {
			return nil, validation("MaximumWindowInMinutes must be 1-1440 when Mode is FLEXIBLE.")
		}
	default:
		return nil, validation("FlexibleTimeWindow.Mode %q must be OFF or FLEXIBLE.", w.Mode)
	}
	loc, err := time.LoadLocation(sc.ScheduleExpressionTimezone)
	if err != nil || sc.ScheduleExpressionTimezone == "Local" {
		return nil, validation("Invalid ScheduleExpressionTimezone %q.", sc.ScheduleExpressionTimezone)
	}
	expr := sc.ScheduleExpression
	if !strings.HasPrefix(expr, "at(") || !strings.HasSuffix(expr, ")") {
		if strings.HasPrefix(expr, "rate(") || strings.HasPrefix(expr, "cron(") {
			return nil, validation("schedulerfake supports only one-time at() schedules, not %q.", expr)
		}
		return nil, validation("Invalid Schedule Expression %q.", expr)
	}
	at, err := time.ParseInLocation("2006-01-02T15:04:05", expr[len("at("):len(expr)-1], loc)
	if err != nil {
		return nil, validation("Invalid Schedule Expression %q.", expr)
	}
	if at.Before(s.now()) {
		return nil, validation("The schedule expression %s in %s is in the past.", expr, sc.ScheduleExpressionTimezone)
	}
	sc.at = at
	t := b.Target
	if t == nil {
		return nil, validation("Target is required.")
	}
	if !strings.HasPrefix(t.Arn, "arn:") || !strings.HasPrefix(t.RoleArn, "arn:") {
		return nil, validation("Target.Arn and Target.RoleArn must be ARNs.")
	}
	if p := t.RetryPolicy; p != nil {
		if n := p.MaximumRetryAttempts; n != nil && (*n < 0 || *n > 185) {
			return nil, validation("MaximumRetryAttempts must be 0-185.")
		}
		if a := p.MaximumEventAgeInSeconds; a != nil && (*a < 60 || *a > 86400) {
			return nil, validation("MaximumEventAgeInSeconds must be 60-86400.")
		}
	}
	if d := t.DeadLetterConfig; d != nil && !strings.HasPrefix(d.Arn, "arn:") {
		return nil, validation("DeadLetterConfig.Arn must be an ARN.")
	}
	sc.Target = *t
	return sc, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}

// getOutput is GetSchedule's answer; dates are epoch seconds, as the service sends them.
type getOutput struct {
	ActionAfterCompletion      string
	Arn                        string
	CreationDate               float64
	Description                string `json:",omitempty"`
	FlexibleTimeWindow         FlexibleTimeWindow
	GroupName                  string
	LastModificationDate       float64
	Name                       string
	ScheduleExpression         string
	ScheduleExpressionTimezone string
	State                      string
	Target                     Target
}

func epochSeconds(t time.Time) float64 { return float64(t.UnixMilli()) / 1000 }

func (s *Server) getSchedule(r *http.Request) (any, *apiError) {
	group := cmp.Or(r.URL.Query().Get("groupName"), "default")
	schedules, ok := s.groups[group]
	if !ok {
		return nil, notFound("Schedule group %s does not exist.", group)
	}
	sc, ok := schedules[r.PathValue("Name")]
	if !ok {
		return nil, notFound("Schedule %s does not exist.", r.PathValue("Name"))
	}
	return getOutput{
		ActionAfterCompletion: sc.ActionAfterCompletion, Arn: sc.Arn,
		CreationDate: epochSeconds(sc.CreationDate), LastModificationDate: epochSeconds(sc.LastModificationDate),
		Description: sc.Description, FlexibleTimeWindow: sc.FlexibleTimeWindow, GroupName: sc.GroupName,
		Name: sc.Name, ScheduleExpression: sc.ScheduleExpression, ScheduleExpressionTimezone: sc.ScheduleExpressionTimezone,
		State: sc.State, Target: sc.Target,
	}, nil
}

func (s *Server) deleteSchedule(r *http.Request) (any, *apiError) {
	group := cmp.Or(r.URL.Query().Get("groupName"), "default")
	name := r.PathValue("Name")
	schedules, ok := s.groups[group]
	if !ok {
		return nil, notFound("Schedule group %s does not exist.", group)
	}
	if _, ok := schedules[name]; !ok {
		return nil, notFound("Schedule %s does not exist.", name)
	}
	delete(schedules, name)
	return struct{}{}, nil
}

func (s *Server) createGroup(r *http.Request) (any, *apiError) {
	name := r.PathValue("Name")
	if !validName(name) {
		return nil, validation("Name %q must match [0-9a-zA-Z-_.]{1,64}.", name)
	}
	if _, ok := s.groups[name]; ok {
		return nil, &apiError{http.StatusConflict, "ConflictException", fmt.Sprintf("Schedule group %s already exists.", name)}
	}
	s.groups[name] = map[string]*Schedule{}
	return map[string]string{"ScheduleGroupArn": fmt.Sprintf("arn:aws:scheduler:%s:%s:schedule-group/%s", Region, Account, name)}, nil
}
