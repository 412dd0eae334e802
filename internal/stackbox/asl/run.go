package asl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"
)

// Common Task resources of the optimized integrations. A Lambda task with
// PayloadResponseOnly names the function's ARN itself as its resource instead.
const (
	ResourceLambdaInvoke   = "arn:aws:states:::lambda:invoke"
	ResourceStartExecution = "arn:aws:states:::states:startExecution"
	ResourceSQSSendMessage = "arn:aws:states:::sqs:sendMessage"
)

// Integration serves a Task resource: it gets the task's parameters (after InputPath and
// Parameters) and returns the task's result (before ResultSelector and ResultPath). Return an
// *Error to fail the task with a chosen error name. It may be called from several goroutines at
// once (Map iterations, Parallel branches).
type Integration func(ctx context.Context, call *Call) (json.RawMessage, error)

// Call is one invocation of a Task's resource.
type Call struct {
	Resource   string
	State      string
	Scope      string // as in Event.Scope
	Parameters json.RawMessage
	// Attempt is 0 for the first try, then 1, 2… for retries ($$.State.RetryCount).
	Attempt   int
	Execution ExecutionInfo
}

// ExecutionInfo is what the context object's Execution and StateMachine hold.
type ExecutionInfo struct {
	ID              string // the execution ARN ($$.Execution.Id)
	Name            string
	StateMachineARN string // $$.StateMachine.Id
	StateMachine    string // $$.StateMachine.Name
	RoleARN         string
	StartTime       time.Time // zero: the clock's time when Run starts
}

// Env is what a run needs from outside.
type Env struct {
	// Integrations serve Task resources by their exact Resource string.
	Integrations map[string]Integration
	// Fallback serves any resource not in Integrations (e.g. every Lambda function ARN); nil:
	// such a task fails the run with an error naming the resource.
	Fallback Integration
	// Clock: nil is RealClock.
	Clock Clock
	// Rand returns numbers in [0, 1) for FULL jitter, States.MathRandom and States.UUID; nil is
	// math/rand.
	Rand      func() float64
	Execution ExecutionInfo
	// History records the run's events when not nil.
	History *History
}

// ErrNoIntegration is returned (wrapped, naming the resource) by Run when a Task's resource has
// no integration: a wiring mistake, not an execution failure.
var ErrNoIntegration = errors.New("no integration for the task resource")

// Run executes the machine on input and returns its output. An execution that fails — a Fail
// state, an error no Catch took, a runtime error — returns an *Error (errors.As) with the error
// name, cause and state; ctx ending or a missing integration return those errors as they are.
func (m *Machine) Run(ctx context.Context, input json.RawMessage, env Env) (json.RawMessage, error) {
	in, err := decode(input)
	if err != nil {
		return nil, fmt.Errorf("execution input: %w", err)
	}
	x := &execution{env: env, clock: env.Clock, history: env.History}
	if x.clock == nil {
		x.clock = RealClock{}
	}
	if x.history == nil {
		x.history = &History{}
	}
	x.eval = &evalEnv{rand: env.Rand}
	if x.env.Rand == nil {
		x.env.Rand = rand.Float64
	}
	info := env.Execution
	if info.StartTime.IsZero() {
		info.StartTime = x.clock.Now()
	}
	x.info = info
	x.input = in
	if m.timeout > 0 {
		x.deadline = info.StartTime.Add(m.timeout)
	}
	x.record(Event{Type: ExecutionStarted, Input: raw(in)})
	out, err := x.runMachine(ctx, m, in, "")
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			x.record(Event{Type: ExecutionFailed, State: e.State, Error: e.Name, Cause: e.Cause})
		}
		return nil, err
	}
	x.record(Event{Type: ExecutionSucceeded, Output: raw(out)})
	return encode(out)
}

type execution struct {
	env      Env
	clock    Clock
	history  *History
	eval     *evalEnv
	info     ExecutionInfo
	input    any
	deadline time.Time
}

func (x *execution) record(e Event) {
	e.Time = x.clock.Now()
	x.history.add(e)
}

func raw(v any) json.RawMessage {
	b, err := encode(v)
	if err != nil {
		return nil
	}
	return b
}

// mapItem is $$.Map.Item while an item's input is built.
type mapItem struct {
	index int
	value any
}

func (x *execution) context(st *state, entered time.Time, retry int, item *mapItem) any {
	c := map[string]any{
		"Execution": map[string]any{
			"Id": x.info.ID, "Name": x.info.Name, "Input": x.input, "RoleArn": x.info.RoleARN,
			"StartTime": timestamp(x.info.StartTime), "RedriveCount": json.Number("0"),
		},
		"StateMachine": map[string]any{"Id": x.info.StateMachineARN, "Name": x.info.StateMachine},
		"State": map[string]any{
			"Name": st.name, "EnteredTime": timestamp(entered), "RetryCount": intValue(int64(retry)),
		},
	}
	if item != nil {
		c["Map"] = map[string]any{"Item": map[string]any{"Index": intValue(int64(item.index)), "Value": item.value}}
	}
	return c
}

func timestamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// runMachine runs states from StartAt until one ends the machine.
func (x *execution) runMachine(ctx context.Context, m *Machine, in any, scope string) (any, error) {
	cur := m.startAt
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		st := m.states[cur]
		if !x.deadline.IsZero() && x.clock.Now().After(x.deadline) {
			return nil, &Error{Name: ErrTimeout, Cause: "the execution ran past its TimeoutSeconds", State: st.name}
		}
		out, next, err := x.runState(ctx, st, in, scope)
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.State == "" {
				e.State = st.name
			}
			return nil, err
		}
		if next == "" {
			return out, nil
		}
		in, cur = out, next
	}
}

// runState runs one state on its raw input and returns its output and the next state ("" when
// the machine ends).
func (x *execution) runState(ctx context.Context, st *state, in any, scope string) (any, string, error) {
	entered := x.clock.Now()
	x.record(Event{Type: StateEntered, State: st.name, Scope: scope, Input: raw(in)})
	out, next, err := x.dispatch(ctx, st, in, scope, entered)
	if err != nil {
		return nil, "", err
	}
	x.record(Event{Type: StateExited, State: st.name, Scope: scope, Output: raw(out), Next: next})
	return out, next, nil
}

func (x *execution) dispatch(ctx context.Context, st *state, in any, scope string, entered time.Time) (any, string, error) {
	switch st.typ {
	case TypeChoice:
		eff, err := applyInputPath(st, in, x.context(st, entered, 0, nil))
		if err != nil {
			return nil, "", err
		}
		cctx := x.context(st, entered, 0, nil)
		next := st.defaultNext
		for _, r := range st.choices {
			ok, err := r.eval(eff, cctx)
			if err != nil {
				return nil, "", err
			}
			if ok {
				next = r.next
				break
			}
		}
		if next == "" {
			return nil, "", &Error{Name: ErrNoChoiceMatched, Cause: fmt.Sprintf("no choice rule matched and there is no Default, input %s", mustEncode(eff))}
		}
		out, err := applyOutputPath(st, eff, cctx)
		return out, next, err
	case TypeSucceed:
		cctx := x.context(st, entered, 0, nil)
		eff, err := applyInputPath(st, in, cctx)
		if err != nil {
			return nil, "", err
		}
		out, err := applyOutputPath(st, eff, cctx)
		return out, "", err
	case TypeFail:
		cctx := x.context(st, entered, 0, nil)
		e := &Error{Name: st.errorName, Cause: st.cause}
		for _, f := range []struct {
			ex  expr
			dst *string
		}{{st.errorExpr, &e.Name}, {st.causeExpr, &e.Cause}} {
			if f.ex == nil {
				continue
			}
			v, err := f.ex.eval(in, cctx, x.eval)
			if err != nil {
				return nil, "", err
			}
			s, ok := v.(string)
			if !ok {
				return nil, "", runtimeErrorf("Fail state %q: ErrorPath/CausePath gave a %s, not a string", st.name, typeName(v))
			}
			*f.dst = s
		}
		return nil, "", e
	case TypeWait:
		cctx := x.context(st, entered, 0, nil)
		eff, err := applyInputPath(st, in, cctx)
		if err != nil {
			return nil, "", err
		}
		d, err := x.waitFor(st, eff, cctx)
		if err != nil {
			return nil, "", err
		}
		x.record(Event{Type: WaitStarted, State: st.name, Scope: scope, Delay: d})
		if d > 0 {
			if err := x.clock.Sleep(ctx, d); err != nil {
				return nil, "", err
			}
		}
		out, err := applyOutputPath(st, eff, cctx)
		return out, st.next, err
	case TypePass:
		cctx := x.context(st, entered, 0, nil)
		out, err := x.produce(st, in, cctx, func(eff any) (any, error) {
			if st.hasResult {
				return st.result, nil
			}
			return eff, nil
		})
		return out, st.next, err
	}
	return x.runWithRetry(ctx, st, in, scope, entered)
}

// produce runs the steps common to Pass, Task, Map and Parallel around the state's work:
// InputPath, Parameters, work, ResultSelector, ResultPath, OutputPath.
func (x *execution) produce(st *state, in, cctx any, work func(eff any) (any, error)) (any, error) {
	eff, err := applyInputPath(st, in, cctx)
	if err != nil {
		return nil, err
	}
	if st.parameters != nil && st.typ != TypeMap {
		if eff, err = st.parameters.eval(eff, cctx, x.eval); err != nil {
			return nil, err
		}
	}
	result, err := work(eff)
	if err != nil {
		return nil, err
	}
	if st.resultSelector != nil {
		if result, err = st.resultSelector.eval(result, cctx, x.eval); err != nil {
			return nil, err
		}
	}
	out, err := applyResultPath(st.resultPath, in, result)
	if err != nil {
		return nil, err
	}
	return applyOutputPath(st, out, cctx)
}

func applyInputPath(st *state, in, cctx any) (any, error) {
	return selectPath(st.inputPath, "InputPath", in, cctx)
}

func applyOutputPath(st *state, out, cctx any) (any, error) {
	return selectPath(st.outputPath, "OutputPath", out, cctx)
}

func selectPath(p *optPath, field string, v, cctx any) (any, error) {
	switch {
	case p == nil:
		return v, nil
	case p.discard:
		return map[string]any{}, nil
	}
	w, ok := p.p.get(v, cctx)
	if !ok {
		return nil, runtimeErrorf("Invalid path '%s' : No results for path: %s (%s of %s)", p.p, p.p, field, mustEncode(v))
	}
	return w, nil
}

func applyResultPath(p *optPath, in, result any) (any, error) {
	switch {
	case p == nil:
		return result, nil
	case p.discard:
		return in, nil
	}
	out, err := p.p.set(in, result)
	if err != nil {
		return nil, &Error{Name: ErrResultPathMatchFailure, Cause: err.Error()}
	}
	return out, nil
}

func (x *execution) waitFor(st *state, eff, cctx any) (time.Duration, error) {
	now := x.clock.Now()
	switch {
	case st.seconds != nil:
		return time.Duration(*st.seconds) * time.Second, nil
	case st.timestamp != nil:
		return max(0, st.timestamp.Sub(now)), nil
	case st.secondsPath != nil:
		v, ok := st.secondsPath.get(eff, cctx)
		n, isInt := integer(v)
		if !ok || !isInt || n < 0 {
			return 0, runtimeErrorf("Wait state %q: SecondsPath %s is %s, not a non-negative integer", st.name, st.secondsPath, mustEncode(v))
		}
		return time.Duration(n) * time.Second, nil
	}
	v, ok := st.timestampPath.get(eff, cctx)
	s, _ := v.(string)
	t, isTime := parseTimestamp(s)
	if !ok || !isTime {
		return 0, runtimeErrorf("Wait state %q: TimestampPath %s is %s, not an RFC 3339 timestamp", st.name, st.timestampPath, mustEncode(v))
	}
	return max(0, t.Sub(now)), nil
}

// runWithRetry runs a Task, Map or Parallel state, retrying and catching its errors as its
// Retry and Catch say.
func (x *execution) runWithRetry(ctx context.Context, st *state, in any, scope string, entered time.Time) (any, string, error) {
	attempts := make([]int, len(st.retry))
	for retry := 0; ; retry++ {
		cctx := x.context(st, entered, retry, nil)
		out, err := x.produce(st, in, cctx, func(eff any) (any, error) {
			switch st.typ {
			case TypeTask:
				return x.task(ctx, st, eff, scope, retry)
			case TypeMap:
				return x.mapState(ctx, st, eff, cctx, scope)
			default:
				return x.parallel(ctx, st, eff, scope)
			}
		})
		if err == nil {
			return out, st.next, nil
		}
		var e *Error
		if !errors.As(err, &e) || e.Name == ErrRuntime {
			return nil, "", err
		}
		if i := findRetrier(st.retry, e.Name); i >= 0 && attempts[i] < st.retry[i].maxAttempts {
			r := st.retry[i]
			d := r.delay(attempts[i], x.env.Rand)
			attempts[i]++
			x.record(Event{Type: RetryScheduled, State: st.name, Scope: scope, Error: e.Name, Cause: e.Cause, Attempt: attempts[i], Delay: d})
			if err := x.clock.Sleep(ctx, d); err != nil {
				return nil, "", err
			}
			continue
		}
		for _, c := range st.catch {
			if !matches(c.errorEquals, e.Name) {
				continue
			}
			x.record(Event{Type: Caught, State: st.name, Scope: scope, Error: e.Name, Cause: e.Cause, Next: c.next})
			errOut := map[string]any{"Error": e.Name, "Cause": e.Cause}
			rp := c.resultPath
			if rp == nil {
				rp = &optPath{p: &path{src: "$"}}
			}
			out, err := applyResultPath(rp, in, errOut)
			if err != nil {
				return nil, "", err
			}
			return out, c.next, nil
		}
		return nil, "", err
	}
}

// findRetrier returns the first retrier whose ErrorEquals matches, or -1. Only that retrier
// counts: once its attempts are spent, later retriers are not tried.
func findRetrier(rs []*retrier, name string) int {
	for i, r := range rs {
		if matches(r.errorEquals, name) {
			return i
		}
	}
	return -1
}

// delay is the wait before retry n (from 0): IntervalSeconds × BackoffRate^n, capped at
// MaxDelaySeconds, and with FULL jitter a random part of that.
func (r *retrier) delay(n int, rnd func() float64) time.Duration {
	d := float64(r.interval) * math.Pow(r.backoffRate, float64(n))
	if r.maxDelay > 0 && d > float64(r.maxDelay) {
		d = float64(r.maxDelay)
	}
	if r.jitterFull {
		d *= rnd()
	}
	return time.Duration(d)
}

func (x *execution) task(ctx context.Context, st *state, params any, scope string, retry int) (any, error) {
	fn := x.env.Integrations[st.resource]
	if fn == nil {
		fn = x.env.Fallback
	}
	if fn == nil {
		return nil, fmt.Errorf("state %q: %w %s", st.name, ErrNoIntegration, st.resource)
	}
	p := raw(params)
	x.record(Event{Type: TaskScheduled, State: st.name, Scope: scope, Resource: st.resource, Input: p, Attempt: retry})
	callCtx := ctx
	if st.timeout > 0 {
		var cancel context.CancelFunc
		callCtx, cancel = context.WithTimeout(ctx, st.timeout)
		defer cancel()
	}
	start := x.clock.Now()
	res, err := fn(callCtx, &Call{Resource: st.resource, State: st.name, Scope: scope, Parameters: p, Attempt: retry, Execution: x.info})
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if st.timeout > 0 && (callCtx.Err() != nil || x.clock.Now().Sub(start) > st.timeout) {
		err = &Error{Name: ErrTimeout, Cause: fmt.Sprintf("the task ran past its TimeoutSeconds (%s)", st.timeout)}
	}
	if err != nil {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Name: ErrTaskFailed, Cause: err.Error()}
		} else {
			e = &Error{Name: e.Name, Cause: e.Cause}
		}
		x.record(Event{Type: TaskFailed, State: st.name, Scope: scope, Resource: st.resource, Error: e.Name, Cause: e.Cause, Attempt: retry})
		return nil, e
	}
	v, derr := decode(res)
	if len(res) == 0 {
		v, derr = nil, nil
	}
	if derr != nil {
		e := &Error{Name: ErrTaskFailed, Cause: fmt.Sprintf("the integration returned invalid JSON: %v", derr)}
		x.record(Event{Type: TaskFailed, State: st.name, Scope: scope, Resource: st.resource, Error: e.Name, Cause: e.Cause, Attempt: retry})
		return nil, e
	}
	x.record(Event{Type: TaskSucceeded, State: st.name, Scope: scope, Resource: st.resource, Output: raw(v), Attempt: retry})
	return v, nil
}

func (x *execution) mapState(ctx context.Context, st *state, eff, cctx any, scope string) (any, error) {
	items := eff
	if st.itemsPath != nil {
		v, ok := st.itemsPath.get(eff, cctx)
		if !ok {
			return nil, runtimeErrorf("Map state %q: ItemsPath %s is not in the input", st.name, st.itemsPath)
		}
		items = v
	}
	list, ok := items.([]any)
	if !ok {
		return nil, runtimeErrorf("Map state %q: the items (%s) are a %s, not an array", st.name, pathString(st.itemsPath), typeName(items))
	}
	results := make([]any, len(list))
	g, gctx := errgroup.WithContext(ctx)
	if st.maxConcurrency > 0 {
		g.SetLimit(st.maxConcurrency)
	}
	var firstErr error
	var once = make(chan struct{}, 1)
	for i, item := range list {
		g.Go(func() error {
			if gctx.Err() != nil {
				return gctx.Err()
			}
			itemCtx := x.itemContext(cctx, i, item)
			input := item
			if st.parameters != nil {
				v, err := st.parameters.eval(eff, itemCtx, x.eval)
				if err != nil {
					return x.iterationFailed(st, scope, i, err, &firstErr, once)
				}
				input = v
			}
			sub := fmt.Sprintf("%s[%d]", st.name, i)
			if scope != "" {
				sub = scope + "/" + sub
			}
			x.record(Event{Type: MapIterationStarted, State: st.name, Scope: scope, Index: i, Input: raw(input)})
			out, err := x.runMachine(gctx, st.processor, input, sub)
			if err != nil {
				return x.iterationFailed(st, scope, i, err, &firstErr, once)
			}
			x.record(Event{Type: MapIterationEnded, State: st.name, Scope: scope, Index: i, Output: raw(out)})
			results[i] = out
			return nil
		})
	}
	err := g.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err != nil {
		return nil, err
	}
	return results, nil
}

// iterationFailed records an iteration's failure; the first one (by time) is the Map's error.
func (x *execution) iterationFailed(st *state, scope string, i int, err error, first *error, once chan struct{}) error {
	var e *Error
	if errors.As(err, &e) {
		x.record(Event{Type: MapIterationFailed, State: st.name, Scope: scope, Index: i, Error: e.Name, Cause: e.Cause})
		select {
		case once <- struct{}{}:
			// The Map fails with the iteration's error, not attributed to the inner state.
			*first = &Error{Name: e.Name, Cause: e.Cause}
		default:
		}
	}
	return err
}

func (x *execution) itemContext(cctx any, i int, item any) any {
	c := cctx.(map[string]any)
	out := make(map[string]any, len(c)+1)
	for k, v := range c {
		out[k] = v
	}
	out["Map"] = map[string]any{"Item": map[string]any{"Index": intValue(int64(i)), "Value": item}}
	return out
}

func pathString(p *path) string {
	if p == nil {
		return "$"
	}
	return p.src
}

func (x *execution) parallel(ctx context.Context, st *state, eff any, scope string) (any, error) {
	results := make([]any, len(st.branches))
	g, gctx := errgroup.WithContext(ctx)
	var firstErr error
	once := make(chan struct{}, 1)
	for i, b := range st.branches {
		g.Go(func() error {
			sub := st.name + ".Branches[" + strconv.Itoa(i) + "]"
			if scope != "" {
				sub = scope + "/" + sub
			}
			out, err := x.runMachine(gctx, b, eff, sub)
			if err != nil {
				var e *Error
				if errors.As(err, &e) {
					select {
					case once <- struct{}{}:
						firstErr = &Error{Name: e.Name, Cause: e.Cause}
					default:
					}
				}
				return err
			}
			results[i] = out
			return nil
		})
	}
	err := g.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err != nil {
		return nil, err
	}
	return results, nil
}
