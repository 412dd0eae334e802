// Package asl runs Amazon States Language definitions — the state machines Herald's CDK app
// synthesizes — on this machine, with each Task's resource served by a Go function the caller
// supplies (a Lambda emulator, a queue, a fake).
//
// It implements the JSONPath dialect of ASL: the Task, Pass, Choice, Wait, Succeed, Fail, Map
// (inline) and Parallel states; InputPath, Parameters/ItemSelector with ".$" keys, intrinsic
// functions, ResultSelector, ResultPath and OutputPath; Retry (IntervalSeconds, MaxAttempts,
// BackoffRate, MaxDelaySeconds, JitterStrategy) and Catch; the context object ($$). Parse refuses
// every state type, field, operator and intrinsic function it does not implement, naming it, so
// a definition using something new fails loudly instead of running differently than on AWS.
//
// Time is the caller's: Env.Clock serves Wait states, retry delays and timeouts, so a test runs
// a day-long machine in no time on a VirtualClock. Each run records its History.
package asl

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Machine is a parsed state machine definition (or a Map's item processor, a Parallel branch).
type Machine struct {
	startAt string
	states  map[string]*state
	timeout time.Duration
	comment string
}

// State types.
const (
	TypeTask     = "Task"
	TypePass     = "Pass"
	TypeChoice   = "Choice"
	TypeWait     = "Wait"
	TypeSucceed  = "Succeed"
	TypeFail     = "Fail"
	TypeMap      = "Map"
	TypeParallel = "Parallel"
)

type state struct {
	name, typ string
	next      string
	end       bool

	// nil: the default "$"; discard: the JSON null (InputPath/OutputPath give {}, ResultPath
	// keeps the input and drops the result).
	inputPath, outputPath, resultPath *optPath
	parameters, resultSelector        *template
	result                            any // Pass
	hasResult                         bool

	resource string
	timeout  time.Duration
	retry    []*retrier
	catch    []*catcher

	choices     []*rule
	defaultNext string

	seconds       *int64
	secondsPath   *path
	timestamp     *time.Time
	timestampPath *path

	errorName, cause     string
	errorExpr, causeExpr expr
	itemsPath            *path
	maxConcurrency       int
	processor            *Machine
	branches             []*Machine
}

type optPath struct {
	discard bool
	p       *path
}

type retrier struct {
	errorEquals []string
	interval    time.Duration
	maxAttempts int
	backoffRate float64
	maxDelay    time.Duration
	jitterFull  bool
}

type catcher struct {
	errorEquals []string
	next        string
	resultPath  *optPath
}

// allowed lists each state type's fields. A field not here fails Parse.
var allowed = map[string][]string{
	TypeTask:     {"Type", "Comment", "Next", "End", "InputPath", "OutputPath", "ResultPath", "Parameters", "ResultSelector", "Resource", "TimeoutSeconds", "Retry", "Catch"},
	TypePass:     {"Type", "Comment", "Next", "End", "InputPath", "OutputPath", "ResultPath", "Parameters", "Result"},
	TypeChoice:   {"Type", "Comment", "InputPath", "OutputPath", "Choices", "Default"},
	TypeWait:     {"Type", "Comment", "Next", "End", "InputPath", "OutputPath", "Seconds", "SecondsPath", "Timestamp", "TimestampPath"},
	TypeSucceed:  {"Type", "Comment", "InputPath", "OutputPath"},
	TypeFail:     {"Type", "Comment", "Error", "Cause", "ErrorPath", "CausePath"},
	TypeMap:      {"Type", "Comment", "Next", "End", "InputPath", "OutputPath", "ResultPath", "Parameters", "ItemSelector", "ResultSelector", "ItemsPath", "MaxConcurrency", "Iterator", "ItemProcessor", "Retry", "Catch"},
	TypeParallel: {"Type", "Comment", "Next", "End", "InputPath", "OutputPath", "ResultPath", "Parameters", "ResultSelector", "Branches", "Retry", "Catch"},
}

// Parse reads a state machine definition. It fails on invalid JSON, a broken reference (a Next
// naming no state) and anything this interpreter does not implement, naming the state and field.
func Parse(def []byte) (*Machine, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(def, &top); err != nil {
		return nil, fmt.Errorf("state machine definition: %w", err)
	}
	for k, v := range top {
		switch k {
		case "StartAt", "States", "Comment", "TimeoutSeconds", "Version":
		case "QueryLanguage":
			var ql string
			if err := json.Unmarshal(v, &ql); err != nil || ql != "JSONPath" {
				return nil, fmt.Errorf("QueryLanguage %s is not supported (only JSONPath)", v)
			}
		default:
			return nil, fmt.Errorf("top-level field %q is not supported", k)
		}
	}
	m, err := parseMachine(top, "")
	if err != nil {
		return nil, err
	}
	if raw, ok := top["TimeoutSeconds"]; ok {
		var s int64
		if err := json.Unmarshal(raw, &s); err != nil || s <= 0 {
			return nil, fmt.Errorf("TimeoutSeconds: must be a positive integer, not %s", raw)
		}
		m.timeout = time.Duration(s) * time.Second
	}
	return m, nil
}

// parseMachine reads StartAt and States of a machine, a Map's processor or a Parallel branch
// (where names the enclosing state for messages).
func parseMachine(f map[string]json.RawMessage, where string) (*Machine, error) {
	m := &Machine{states: map[string]*state{}}
	if err := unmarshalField(f, "StartAt", &m.startAt, where); err != nil {
		return nil, err
	}
	_ = unmarshalField(f, "Comment", &m.comment, where)
	var states map[string]json.RawMessage
	if err := unmarshalField(f, "States", &states, where); err != nil {
		return nil, err
	}
	if len(states) == 0 {
		return nil, fmt.Errorf("%sStates: empty", prefix(where))
	}
	for _, name := range sortedKeys(states) {
		st, err := parseState(name, states[name], where)
		if err != nil {
			return nil, err
		}
		m.states[name] = st
	}
	if _, ok := m.states[m.startAt]; !ok {
		return nil, fmt.Errorf("%sStartAt %q names no state", prefix(where), m.startAt)
	}
	for _, name := range sortedKeys(m.states) {
		st := m.states[name]
		targets := []string{st.next, st.defaultNext}
		for _, c := range st.catch {
			targets = append(targets, c.next)
		}
		for _, r := range st.choices {
			targets = append(targets, r.next)
		}
		for _, t := range targets {
			if _, ok := m.states[t]; t != "" && !ok {
				return nil, fmt.Errorf("%sstate %q: transition to %q, which is not a state here", prefix(where), name, t)
			}
		}
	}
	return m, nil
}

func prefix(where string) string {
	if where == "" {
		return ""
	}
	return where + ": "
}

func parseState(name string, raw json.RawMessage, where string) (*state, error) {
	at := prefix(where) + "state " + fmt.Sprintf("%q", name)
	var f map[string]json.RawMessage
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", at, err)
	}
	st := &state{name: name}
	if err := unmarshalField(f, "Type", &st.typ, at); err != nil {
		return nil, err
	}
	fields, ok := allowed[st.typ]
	if !ok {
		return nil, fmt.Errorf("%s: state type %q is not supported", at, st.typ)
	}
	for k := range f {
		if !slices.Contains(fields, k) {
			return nil, fmt.Errorf("%s: field %q of a %s state is not supported", at, k, st.typ)
		}
	}
	var err error
	opt := func(key string, reference bool) *optPath {
		if err != nil {
			return nil
		}
		v, ok := f[key]
		if !ok {
			return nil
		}
		if string(v) == "null" {
			return &optPath{discard: true}
		}
		var s string
		if e := json.Unmarshal(v, &s); e != nil {
			err = fmt.Errorf("%s.%s: %w", at, key, e)
			return nil
		}
		var p *path
		if reference {
			p, err = parseReferencePath(s, false)
		} else {
			p, err = parsePath(s)
		}
		if err != nil {
			err = fmt.Errorf("%s.%s: %w", at, key, err)
			return nil
		}
		return &optPath{p: p}
	}
	st.inputPath = opt("InputPath", false)
	st.outputPath = opt("OutputPath", false)
	st.resultPath = opt("ResultPath", true)
	if err != nil {
		return nil, err
	}

	if st.typ != TypeChoice && st.typ != TypeSucceed && st.typ != TypeFail {
		_ = unmarshalField(f, "Next", &st.next, at)
		if v, ok := f["End"]; ok {
			if err := json.Unmarshal(v, &st.end); err != nil {
				return nil, fmt.Errorf("%s.End: %w", at, err)
			}
		}
		if (st.next == "") == !st.end {
			return nil, fmt.Errorf("%s: needs exactly one of Next and End", at)
		}
	}
	for _, key := range []string{"Parameters", "ItemSelector"} {
		if v, ok := f[key]; ok {
			if st.parameters != nil {
				return nil, fmt.Errorf("%s: both Parameters and ItemSelector", at)
			}
			if st.parameters, err = compileTemplate(v, at+"."+key); err != nil {
				return nil, err
			}
		}
	}
	if v, ok := f["ResultSelector"]; ok {
		if st.resultSelector, err = compileTemplate(v, at+".ResultSelector"); err != nil {
			return nil, err
		}
	}
	if st.retry, err = parseRetry(f["Retry"], at); err != nil {
		return nil, err
	}
	if st.catch, err = parseCatch(f["Catch"], at); err != nil {
		return nil, err
	}

	switch st.typ {
	case TypeTask:
		if err := unmarshalField(f, "Resource", &st.resource, at); err != nil {
			return nil, err
		}
		if v, ok := f["TimeoutSeconds"]; ok {
			var s int64
			if err := json.Unmarshal(v, &s); err != nil || s <= 0 {
				return nil, fmt.Errorf("%s.TimeoutSeconds: must be a positive integer, not %s", at, v)
			}
			st.timeout = time.Duration(s) * time.Second
		}
	case TypePass:
		if v, ok := f["Result"]; ok {
			if st.result, err = decode(v); err != nil {
				return nil, fmt.Errorf("%s.Result: %w", at, err)
			}
			st.hasResult = true
		}
	case TypeChoice:
		var list []json.RawMessage
		if err := unmarshalField(f, "Choices", &list, at); err != nil {
			return nil, err
		}
		if len(list) == 0 {
			return nil, fmt.Errorf("%s.Choices: empty", at)
		}
		for i, item := range list {
			r, err := parseRule(item, fmt.Sprintf("%s.Choices[%d]", at, i), true)
			if err != nil {
				return nil, err
			}
			st.choices = append(st.choices, r)
		}
		if _, ok := f["Default"]; ok {
			_ = unmarshalField(f, "Default", &st.defaultNext, at)
		}
	case TypeWait:
		if err := parseWait(st, f, at); err != nil {
			return nil, err
		}
	case TypeFail:
		if err := parseFail(st, f, at); err != nil {
			return nil, err
		}
	case TypeMap:
		if err := parseMap(st, f, at); err != nil {
			return nil, err
		}
	case TypeParallel:
		var branches []map[string]json.RawMessage
		if err := unmarshalField(f, "Branches", &branches, at); err != nil {
			return nil, err
		}
		if len(branches) == 0 {
			return nil, fmt.Errorf("%s.Branches: empty", at)
		}
		for i, b := range branches {
			for k := range b {
				if k != "StartAt" && k != "States" && k != "Comment" {
					return nil, fmt.Errorf("%s.Branches[%d]: field %q is not supported", at, i, k)
				}
			}
			m, err := parseMachine(b, fmt.Sprintf("%s.Branches[%d]", at, i))
			if err != nil {
				return nil, err
			}
			st.branches = append(st.branches, m)
		}
	}
	return st, nil
}

func parseWait(st *state, f map[string]json.RawMessage, at string) error {
	n := 0
	if v, ok := f["Seconds"]; ok {
		var s int64
		if err := json.Unmarshal(v, &s); err != nil || s < 0 {
			return fmt.Errorf("%s.Seconds: must be a non-negative integer, not %s", at, v)
		}
		st.seconds, n = &s, n+1
	}
	if v, ok := f["Timestamp"]; ok {
		var s string
		_ = json.Unmarshal(v, &s)
		t, ok := parseTimestamp(s)
		if !ok {
			return fmt.Errorf("%s.Timestamp: %s is not an RFC 3339 timestamp", at, v)
		}
		st.timestamp, n = &t, n+1
	}
	for _, key := range []string{"SecondsPath", "TimestampPath"} {
		v, ok := f[key]
		if !ok {
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("%s.%s: %w", at, key, err)
		}
		p, err := parseReferencePath(s, true)
		if err != nil {
			return fmt.Errorf("%s.%s: %w", at, key, err)
		}
		if key == "SecondsPath" {
			st.secondsPath = p
		} else {
			st.timestampPath = p
		}
		n++
	}
	if n != 1 {
		return fmt.Errorf("%s: needs exactly one of Seconds, SecondsPath, Timestamp and TimestampPath", at)
	}
	return nil
}

func parseFail(st *state, f map[string]json.RawMessage, at string) error {
	for _, key := range []string{"Error", "Cause"} {
		lit, hasLit := f[key]
		pth, hasPath := f[key+"Path"]
		if hasLit && hasPath {
			return fmt.Errorf("%s: both %s and %sPath", at, key, key)
		}
		var s string
		switch {
		case hasLit:
			if err := json.Unmarshal(lit, &s); err != nil {
				return fmt.Errorf("%s.%s: %w", at, key, err)
			}
			if key == "Error" {
				st.errorName = s
			} else {
				st.cause = s
			}
		case hasPath:
			if err := json.Unmarshal(pth, &s); err != nil {
				return fmt.Errorf("%s.%sPath: %w", at, key, err)
			}
			e, err := compileExpr(s)
			if err != nil {
				return fmt.Errorf("%s.%sPath: %w", at, key, err)
			}
			if key == "Error" {
				st.errorExpr = e
			} else {
				st.causeExpr = e
			}
		}
	}
	return nil
}

func parseMap(st *state, f map[string]json.RawMessage, at string) error {
	if v, ok := f["ItemsPath"]; ok {
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return fmt.Errorf("%s.ItemsPath: %w", at, err)
		}
		p, err := parseReferencePath(s, true)
		if err != nil {
			return fmt.Errorf("%s.ItemsPath: %w", at, err)
		}
		st.itemsPath = p
	}
	if v, ok := f["MaxConcurrency"]; ok {
		if err := json.Unmarshal(v, &st.maxConcurrency); err != nil || st.maxConcurrency < 0 {
			return fmt.Errorf("%s.MaxConcurrency: must be a non-negative integer, not %s", at, v)
		}
	}
	_, hasIterator := f["Iterator"]
	_, hasProcessor := f["ItemProcessor"]
	if hasIterator == hasProcessor {
		return fmt.Errorf("%s: needs exactly one of ItemProcessor and Iterator", at)
	}
	key := "ItemProcessor"
	if hasIterator {
		key = "Iterator"
	}
	var proc map[string]json.RawMessage
	if err := unmarshalField(f, key, &proc, at); err != nil {
		return err
	}
	for k, v := range proc {
		switch k {
		case "StartAt", "States", "Comment":
		case "ProcessorConfig":
			var pc map[string]json.RawMessage
			if err := json.Unmarshal(v, &pc); err != nil {
				return fmt.Errorf("%s.%s.ProcessorConfig: %w", at, key, err)
			}
			for pk, pv := range pc {
				var mode string
				if pk != "Mode" || json.Unmarshal(pv, &mode) != nil || mode != "INLINE" {
					return fmt.Errorf("%s.%s.ProcessorConfig: %s %s is not supported (only Mode INLINE)", at, key, pk, pv)
				}
			}
		default:
			return fmt.Errorf("%s.%s: field %q is not supported", at, key, k)
		}
	}
	m, err := parseMachine(proc, at+"."+key)
	if err != nil {
		return err
	}
	st.processor = m
	return nil
}

func parseRetry(raw json.RawMessage, at string) ([]*retrier, error) {
	if raw == nil {
		return nil, nil
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s.Retry: %w", at, err)
	}
	var out []*retrier
	for i, f := range list {
		w := fmt.Sprintf("%s.Retry[%d]", at, i)
		r := &retrier{interval: time.Second, maxAttempts: 3, backoffRate: 2}
		for k, v := range f {
			var err error
			switch k {
			case "ErrorEquals":
				err = json.Unmarshal(v, &r.errorEquals)
			case "IntervalSeconds":
				var s int64
				if err = json.Unmarshal(v, &s); err == nil && s < 1 {
					err = fmt.Errorf("must be at least 1")
				}
				r.interval = time.Duration(s) * time.Second
			case "MaxAttempts":
				if err = json.Unmarshal(v, &r.maxAttempts); err == nil && r.maxAttempts < 0 {
					err = fmt.Errorf("must not be negative")
				}
			case "BackoffRate":
				if err = json.Unmarshal(v, &r.backoffRate); err == nil && r.backoffRate < 1 {
					err = fmt.Errorf("must be at least 1.0")
				}
			case "MaxDelaySeconds":
				var s int64
				if err = json.Unmarshal(v, &s); err == nil && s < 1 {
					err = fmt.Errorf("must be at least 1")
				}
				r.maxDelay = time.Duration(s) * time.Second
			case "JitterStrategy":
				var s string
				if err = json.Unmarshal(v, &s); err == nil && s != "FULL" && s != "NONE" {
					err = fmt.Errorf("%q is not FULL or NONE", s)
				}
				r.jitterFull = s == "FULL"
			case "Comment":
			default:
				return nil, fmt.Errorf("%s: field %q is not supported", w, k)
			}
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %v", w, k, err)
			}
		}
		if len(r.errorEquals) == 0 {
			return nil, fmt.Errorf("%s: needs ErrorEquals", w)
		}
		out = append(out, r)
	}
	return out, nil
}

func parseCatch(raw json.RawMessage, at string) ([]*catcher, error) {
	if raw == nil {
		return nil, nil
	}
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("%s.Catch: %w", at, err)
	}
	var out []*catcher
	for i, f := range list {
		w := fmt.Sprintf("%s.Catch[%d]", at, i)
		c := &catcher{}
		for k, v := range f {
			switch k {
			case "ErrorEquals":
				if err := json.Unmarshal(v, &c.errorEquals); err != nil {
					return nil, fmt.Errorf("%s.ErrorEquals: %w", w, err)
				}
			case "Next":
				if err := json.Unmarshal(v, &c.next); err != nil {
					return nil, fmt.Errorf("%s.Next: %w", w, err)
				}
			case "ResultPath":
				if string(v) == "null" {
					c.resultPath = &optPath{discard: true}
					continue
				}
				var s string
				if err := json.Unmarshal(v, &s); err != nil {
					return nil, fmt.Errorf("%s.ResultPath: %w", w, err)
				}
				p, err := parseReferencePath(s, false)
				if err != nil {
					return nil, fmt.Errorf("%s.ResultPath: %w", w, err)
				}
				c.resultPath = &optPath{p: p}
			case "Comment":
			default:
				return nil, fmt.Errorf("%s: field %q is not supported", w, k)
			}
		}
		if len(c.errorEquals) == 0 || c.next == "" {
			return nil, fmt.Errorf("%s: needs ErrorEquals and Next", w)
		}
		out = append(out, c)
	}
	return out, nil
}

func unmarshalField(f map[string]json.RawMessage, key string, dst any, at string) error {
	v, ok := f[key]
	if !ok {
		return fmt.Errorf("%s%s: missing", prefix(at), key)
	}
	if err := json.Unmarshal(v, dst); err != nil {
		return fmt.Errorf("%s%s: %w", prefix(at), key, err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// StartAt is the machine's first state.
func (m *Machine) StartAt() string { return m.startAt }

// Timeout is the definition's TimeoutSeconds (0: none).
func (m *Machine) Timeout() time.Duration { return m.timeout }

// States lists the machine's state names, nested ones (a Map's processor, Parallel branches)
// included, sorted.
func (m *Machine) States() []string {
	var out []string
	m.walk(func(st *state) { out = append(out, st.name) })
	sort.Strings(out)
	return out
}

// Resources lists every distinct Task resource, nested states included, sorted: what a runner
// must supply an integration for.
func (m *Machine) Resources() []string {
	var out []string
	m.walk(func(st *state) {
		if st.resource != "" && !slices.Contains(out, st.resource) {
			out = append(out, st.resource)
		}
	})
	sort.Strings(out)
	return out
}

// TaskResource returns the Resource of the named Task state.
func (m *Machine) TaskResource(stateName string) (string, bool) {
	var res string
	var ok bool
	m.walk(func(st *state) {
		if st.name == stateName && st.typ == TypeTask {
			res, ok = st.resource, true
		}
	})
	return res, ok
}

func (m *Machine) walk(fn func(*state)) {
	for _, name := range sortedKeys(m.states) {
		st := m.states[name]
		fn(st)
		if st.processor != nil {
			st.processor.walk(fn)
		}
		for _, b := range st.branches {
			b.walk(fn)
		}
	}
}

// String summarizes the machine for messages.
func (m *Machine) String() string {
	return fmt.Sprintf("state machine starting at %q with states %s", m.startAt, strings.Join(m.States(), ", "))
}
