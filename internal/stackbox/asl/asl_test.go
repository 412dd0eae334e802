package asl_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"herald/internal/stackbox/asl"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// jsonEq compares two JSON texts by value.
func jsonEq(t *testing.T, got json.RawMessage, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("output %s: %v", got, err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("want %s: %v", want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Fatalf("output\n got %s\nwant %s", got, want)
	}
}

func mustParse(t *testing.T, def string) *asl.Machine {
	t.Helper()
	m, err := asl.Parse([]byte(def))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return m
}

// pass wraps a Pass state's fields into a one-state machine.
func pass(fields string) string {
	return `{"StartAt":"P","States":{"P":{"Type":"Pass",` + fields + `,"End":true}}}`
}

func env() asl.Env {
	return asl.Env{Clock: asl.NewVirtualClock(t0), History: &asl.History{},
		Execution: asl.ExecutionInfo{ID: "arn:aws:states:eu-west-1:123456789012:execution:sm:run-1", Name: "run-1",
			StateMachineARN: "arn:aws:states:eu-west-1:123456789012:stateMachine:sm", StateMachine: "sm"}}
}

func TestPassAndPaths(t *testing.T) {
	in := `{"a":{"b":[10,{"c":"x"}],"n":2},"s":"str","list":[{"id":1},{"id":2}]}`
	cases := []struct {
		name, def, want string
	}{
		{"no fields is identity", pass(`"Comment":"x"`), in},
		{"InputPath", pass(`"InputPath":"$.a.n"`), `2`},
		{"InputPath null gives {}", pass(`"InputPath":null`), `{}`},
		{"index and dot", pass(`"InputPath":"$.a.b[1].c"`), `"x"`},
		{"bracket name", pass(`"InputPath":"$['a']['n']"`), `2`},
		{"wildcard collects", pass(`"InputPath":"$.list[*].id"`), `[1,2]`},
		{"Result replaces", pass(`"Result":{"r":true}`), `{"r":true}`},
		{"ResultPath merges", pass(`"Result":1,"ResultPath":"$.a.added"`), `{"a":{"b":[10,{"c":"x"}],"n":2,"added":1},"s":"str","list":[{"id":1},{"id":2}]}`},
		{"ResultPath creates objects", pass(`"Result":1,"ResultPath":"$.new.deep"`), `{"a":{"b":[10,{"c":"x"}],"n":2},"s":"str","list":[{"id":1},{"id":2}],"new":{"deep":1}}`},
		{"ResultPath null keeps input", pass(`"Result":1,"ResultPath":null`), in},
		{"OutputPath", pass(`"Result":{"x":{"y":3}},"OutputPath":"$.x"`), `{"y":3}`},
		{"Parameters with paths and context", pass(`"Parameters":{"lit":"v","n.$":"$.a.n","nested":{"s.$":"$.s","arr":[{"c.$":"$.a.b[1].c"}]},"exec.$":"$$.Execution.Name","state.$":"$$.State.Name","sm.$":"$$.StateMachine.Id","in.$":"$$.Execution.Input.s"}`),
			`{"lit":"v","n":2,"nested":{"s":"str","arr":[{"c":"x"}]},"exec":"run-1","state":"P","sm":"arn:aws:states:eu-west-1:123456789012:stateMachine:sm","in":"str"}`},
		{"Parameters then ResultPath", pass(`"Parameters":{"k.$":"$.s"},"ResultPath":"$.p","OutputPath":"$.p"`), `{"k":"str"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, err := mustParse(t, c.def).Run(context.Background(), json.RawMessage(in), env())
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, out, c.want)
		})
	}
}

func TestRuntimeErrors(t *testing.T) {
	cases := []struct {
		name, def, errName string
	}{
		{"missing InputPath", pass(`"InputPath":"$.nope"`), asl.ErrRuntime},
		{"missing OutputPath", pass(`"OutputPath":"$.nope"`), asl.ErrRuntime},
		{"missing Parameters path", pass(`"Parameters":{"x.$":"$.nope"}`), asl.ErrParameterPathFailure},
		{"ResultPath through a string", pass(`"Result":1,"ResultPath":"$.s.x"`), asl.ErrResultPathMatchFailure},
		{"intrinsic on wrong type", pass(`"Parameters":{"x.$":"States.ArrayLength($.s)"}`), asl.ErrIntrinsicFailure},
		{"no choice matched", `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"Variable":"$.s","StringEquals":"other","Next":"E"}]},"E":{"Type":"Succeed"}}}`, asl.ErrNoChoiceMatched},
		{"choice variable missing", `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"Variable":"$.nope","StringEquals":"x","Next":"E"}],"Default":"E"},"E":{"Type":"Succeed"}}}`, asl.ErrRuntime},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := mustParse(t, c.def).Run(context.Background(), json.RawMessage(`{"s":"str"}`), env())
			var e *asl.Error
			if !errors.As(err, &e) || e.Name != c.errName {
				t.Fatalf("err = %v, want %s", err, c.errName)
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	cases := []struct {
		name, def, want string
	}{
		{"unknown state type", `{"StartAt":"A","States":{"A":{"Type":"Teleport","End":true}}}`, `state type "Teleport"`},
		{"unknown field", `{"StartAt":"A","States":{"A":{"Type":"Pass","Assign":{"x":1},"End":true}}}`, `field "Assign"`},
		{"unknown top-level field", `{"StartAt":"A","States":{"A":{"Type":"Succeed"}},"Extra":1}`, `top-level field "Extra"`},
		{"JSONata", `{"QueryLanguage":"JSONata","StartAt":"A","States":{"A":{"Type":"Succeed"}}}`, `QueryLanguage`},
		{"unknown intrinsic", pass(`"Parameters":{"x.$":"States.Teleport($.a)"}`), `States.Teleport is not supported`},
		{"intrinsic arity", pass(`"Parameters":{"x.$":"States.MathAdd($.a)"}`), `States.MathAdd takes 2 arguments`},
		{"filter path", pass(`"InputPath":"$.a[?(@.b)]"`), `not supported`},
		{"deep scan", pass(`"InputPath":"$..a"`), `deep scan`},
		{"wildcard ResultPath", pass(`"ResultPath":"$.a[*]"`), `wildcards`},
		{"dangling Next", `{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"B"}}}`, `"B", which is not a state`},
		{"bad StartAt", `{"StartAt":"Z","States":{"A":{"Type":"Succeed"}}}`, `StartAt "Z"`},
		{"Next and End", `{"StartAt":"A","States":{"A":{"Type":"Pass","Next":"A","End":true}}}`, `exactly one of Next and End`},
		{"unknown choice operator", `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{"Variable":"$.a","StringSortsBefore":"x","Next":"E"}]},"E":{"Type":"Succeed"}}}`, `"StringSortsBefore"`},
		{"distributed map", `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED","ExecutionType":"STANDARD"},"StartAt":"I","States":{"I":{"Type":"Succeed"}}},"End":true}}}`, `only Mode INLINE`},
		{"item reader", `{"StartAt":"M","States":{"M":{"Type":"Map","ItemReader":{},"ItemProcessor":{"StartAt":"I","States":{"I":{"Type":"Succeed"}}},"End":true}}}`, `field "ItemReader"`},
		{"retry field", `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","Retry":[{"ErrorEquals":["States.ALL"],"Backoff":2}],"End":true}}}`, `field "Backoff"`},
		{"task heartbeat", `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","HeartbeatSeconds":5,"End":true}}}`, `field "HeartbeatSeconds"`},
		{"nested unknown in map", `{"StartAt":"M","States":{"M":{"Type":"Map","ItemProcessor":{"StartAt":"I","States":{"I":{"Type":"Pass","Output":{},"End":true}}},"End":true}}}`, `field "Output"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := asl.Parse([]byte(c.def))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to mention %s", err, c.want)
			}
		})
	}
}

func TestIntrinsics(t *testing.T) {
	in := `{"n":41,"s":"a,b;c","arr":[1,2,2,3],"obj":{"a":1,"b":{"x":1}},"obj2":{"b":2},"js":"{\"k\":[1]}","name":"Ann"}`
	cases := []struct {
		expr, want string
	}{
		{`States.MathAdd($.n, 1)`, `42`},
		{`States.MathAdd($.n, -41)`, `0`},
		{`States.Format('Hello {}, you are {} \{ok\}', $.name, $.n)`, `"Hello Ann, you are 41 {ok}"`},
		{`States.Format('it\'s {}', true)`, `"it's true"`},
		{`States.StringToJson($.js)`, `{"k":[1]}`},
		{`States.JsonToString($.obj2)`, `"{\"b\":2}"`},
		{`States.JsonMerge($.obj, $.obj2, false)`, `{"a":1,"b":2}`},
		{`States.ArrayLength($.arr)`, `4`},
		{`States.Array($.n, 'x', null)`, `[41,"x",null]`},
		{`States.ArrayPartition($.arr, 3)`, `[[1,2,2],[3]]`},
		{`States.ArrayContains($.arr, 3)`, `true`},
		{`States.ArrayRange(1, 9, 4)`, `[1,5,9]`},
		{`States.ArrayGetItem($.arr, 3)`, `3`},
		{`States.ArrayUnique($.arr)`, `[1,2,3]`},
		{`States.Base64Decode(States.Base64Encode($.name))`, `"Ann"`},
		{`States.Hash($.name, 'SHA-256')`, `"17239b6e250110330eda64a29c610bf146f89883371fab093feda03bec61b646"`},
		{`States.StringSplit($.s, ',;')`, `["a","b","c"]`},
		{`States.ArrayLength(States.StringSplit($.s, ','))`, `2`},
		{`States.MathRandom(10, 20)`, `15`},
	}
	for _, c := range cases {
		t.Run(c.expr, func(t *testing.T) {
			def := pass(`"Parameters":{"v.$":` + mustJSON(c.expr) + `},"OutputPath":"$.v"`)
			e := env()
			e.Rand = func() float64 { return 0.5 }
			out, err := mustParse(t, def).Run(context.Background(), json.RawMessage(in), e)
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, out, c.want)
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestChoiceOperators(t *testing.T) {
	in := `{"s":"banana","n":5,"f":2.5,"b":true,"t":"2026-03-01T12:00:00Z","t2":"2026-03-02T00:00:00Z","nul":null,"other":5}`
	cases := []struct {
		rule string
		want bool
	}{
		{`"Variable":"$.s","StringEquals":"banana"`, true},
		{`"Variable":"$.s","StringEquals":"apple"`, false},
		{`"Variable":"$.n","StringEquals":"5"`, false}, // a number is not a string: no match, no error
		{`"Variable":"$.s","StringLessThan":"cherry"`, true},
		{`"Variable":"$.s","StringGreaterThanEquals":"banana"`, true},
		{`"Variable":"$.s","StringMatches":"ban*a"`, true},
		{`"Variable":"$.s","StringMatches":"b*x"`, false},
		{`"Variable":"$.n","NumericEquals":5`, true},
		{`"Variable":"$.n","NumericEquals":5.0`, true},
		{`"Variable":"$.f","NumericLessThan":3`, true},
		{`"Variable":"$.f","NumericGreaterThan":3`, false},
		{`"Variable":"$.n","NumericLessThanEquals":5`, true},
		{`"Variable":"$.n","NumericEqualsPath":"$.other"`, true},
		{`"Variable":"$.b","BooleanEquals":true`, true},
		{`"Variable":"$.b","BooleanEquals":false`, false},
		{`"Variable":"$.t","TimestampLessThan":"2026-03-01T12:00:01Z"`, true},
		{`"Variable":"$.t","TimestampLessThanPath":"$.t2"`, true},
		{`"Variable":"$.t","TimestampEquals":"2026-03-01T13:00:00+01:00"`, true},
		{`"Variable":"$.nul","IsNull":true`, true},
		{`"Variable":"$.missing","IsPresent":false`, true},
		{`"Variable":"$.s","IsPresent":true`, true},
		{`"Variable":"$.n","IsNumeric":true`, true},
		{`"Variable":"$.s","IsString":true`, true},
		{`"Variable":"$.b","IsBoolean":true`, true},
		{`"Variable":"$.t","IsTimestamp":true`, true},
		{`"Variable":"$.s","IsTimestamp":true`, false},
		{`"And":[{"Variable":"$.n","NumericEquals":5},{"Variable":"$.b","BooleanEquals":true}]`, true},
		{`"And":[{"Variable":"$.n","NumericEquals":5},{"Variable":"$.b","BooleanEquals":false}]`, false},
		{`"Or":[{"Variable":"$.n","NumericEquals":1},{"Variable":"$.s","StringEquals":"banana"}]`, true},
		{`"Not":{"Variable":"$.s","StringEquals":"banana"}`, false},
		{`"Variable":"$$.Execution.Name","StringEquals":"run-1"`, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			def := `{"StartAt":"C","States":{"C":{"Type":"Choice","Choices":[{` + c.rule + `,"Next":"Yes"}],"Default":"No"},
				"Yes":{"Type":"Pass","Result":true,"End":true},"No":{"Type":"Pass","Result":false,"End":true}}}`
			out, err := mustParse(t, def).Run(context.Background(), json.RawMessage(in), env())
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, out, fmt.Sprint(c.want))
		})
	}
}

func TestTaskIntegration(t *testing.T) {
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
		"InputPath":"$.job","Parameters":{"FunctionName":"fn","Payload":{"step":"go","state.$":"$","retry.$":"$$.State.RetryCount"}},
		"ResultSelector":{"body.$":"$.Payload"},"ResultPath":"$.result","End":true}}}`
	var got *asl.Call
	e := env()
	e.Integrations = map[string]asl.Integration{asl.ResourceLambdaInvoke: func(_ context.Context, c *asl.Call) (json.RawMessage, error) {
		got = c
		return json.RawMessage(`{"StatusCode":200,"Payload":{"ok":true}}`), nil
	}}
	out, err := mustParse(t, def).Run(context.Background(), json.RawMessage(`{"job":{"id":7}}`), e)
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, out, `{"job":{"id":7},"result":{"body":{"ok":true}}}`)
	jsonEq(t, got.Parameters, `{"FunctionName":"fn","Payload":{"step":"go","state":{"id":7},"retry":0}}`)
	if got.State != "T" || got.Execution.Name != "run-1" || got.Resource != asl.ResourceLambdaInvoke {
		t.Fatalf("call = %+v", got)
	}
}

func TestMissingIntegrationIsAWiringError(t *testing.T) {
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"arn:aws:lambda:eu-west-1:1:function:f","End":true}}}`
	_, err := mustParse(t, def).Run(context.Background(), nil, env())
	if !errors.Is(err, asl.ErrNoIntegration) || !strings.Contains(err.Error(), "function:f") {
		t.Fatalf("err = %v", err)
	}
	e := env()
	e.Fallback = func(_ context.Context, c *asl.Call) (json.RawMessage, error) {
		return json.RawMessage(`"` + c.Resource + `"`), nil
	}
	out, err := mustParse(t, def).Run(context.Background(), nil, e)
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, out, `"arn:aws:lambda:eu-west-1:1:function:f"`)
}

// failing returns an integration that fails with the given errors in turn, then succeeds.
func failing(errs ...error) (asl.Integration, *atomic.Int32) {
	var n atomic.Int32
	return func(context.Context, *asl.Call) (json.RawMessage, error) {
		i := int(n.Add(1)) - 1
		if i < len(errs) {
			return nil, errs[i]
		}
		return json.RawMessage(`"done"`), nil
	}, &n
}

func TestRetryAndCatch(t *testing.T) {
	custom := &asl.Error{Name: "ThrottledError", Cause: "slow down"}
	task := func(retry, catch string) string {
		return `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","Retry":` + retry + `,"Catch":` + catch + `,"End":true},
			"Handled":{"Type":"Pass","End":true}}}`
	}
	cases := []struct {
		name         string
		retry, catch string
		errs         []error
		rand         float64
		wantOut      string // "" when the run must fail
		wantErr      string
		wantCalls    int32
		wantDelays   []time.Duration
	}{
		{name: "backoff until success",
			retry: `[{"ErrorEquals":["States.TaskFailed"],"IntervalSeconds":2,"BackoffRate":2,"MaxAttempts":3}]`, catch: `[]`,
			errs: []error{custom, errors.New("boom")}, wantOut: `"done"`, wantCalls: 3, wantDelays: []time.Duration{2 * time.Second, 4 * time.Second}},
		{name: "defaults: 1s, rate 2, 3 attempts, then the error fails the run",
			retry: `[{"ErrorEquals":["States.ALL"]}]`, catch: `[]`,
			errs: []error{custom, custom, custom, custom}, wantErr: "ThrottledError", wantCalls: 4, wantDelays: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{name: "MaxDelaySeconds caps",
			retry: `[{"ErrorEquals":["ThrottledError"],"IntervalSeconds":10,"BackoffRate":3,"MaxAttempts":3,"MaxDelaySeconds":20}]`, catch: `[]`,
			errs: []error{custom, custom, custom}, wantOut: `"done"`, wantCalls: 4, wantDelays: []time.Duration{10 * time.Second, 20 * time.Second, 20 * time.Second}},
		{name: "FULL jitter scales the delay",
			retry: `[{"ErrorEquals":["States.ALL"],"IntervalSeconds":4,"JitterStrategy":"FULL"}]`, catch: `[]`, rand: 0.25,
			errs: []error{custom}, wantOut: `"done"`, wantCalls: 2, wantDelays: []time.Duration{time.Second}},
		{name: "first matching retrier only: exhausted, it does not fall through",
			retry: `[{"ErrorEquals":["ThrottledError"],"MaxAttempts":1},{"ErrorEquals":["States.ALL"],"MaxAttempts":5}]`, catch: `[]`,
			errs: []error{custom, custom}, wantErr: "ThrottledError", wantCalls: 2, wantDelays: []time.Duration{time.Second}},
		{name: "MaxAttempts 0 never retries; Catch takes it with ResultPath",
			retry: `[{"ErrorEquals":["States.ALL"],"MaxAttempts":0}]`, catch: `[{"ErrorEquals":["ThrottledError"],"ResultPath":"$.err","Next":"Handled"}]`,
			errs: []error{custom}, wantOut: `{"in":1,"err":{"Error":"ThrottledError","Cause":"slow down"}}`, wantCalls: 1},
		{name: "a non-matching catcher leaves the error",
			retry: `[]`, catch: `[{"ErrorEquals":["Other"],"Next":"Handled"}]`,
			errs: []error{custom}, wantErr: "ThrottledError", wantCalls: 1},
		{name: "a plain Go error is States.TaskFailed",
			retry: `[]`, catch: `[{"ErrorEquals":["States.TaskFailed"],"Next":"Handled"}]`,
			errs: []error{errors.New("plain")}, wantOut: `{"Error":"States.TaskFailed","Cause":"plain"}`, wantCalls: 1},
		{name: "States.TaskFailed does not match States.Timeout",
			retry: `[{"ErrorEquals":["States.TaskFailed"]}]`, catch: `[{"ErrorEquals":["States.Timeout"],"ResultPath":null,"Next":"Handled"}]`,
			errs: []error{&asl.Error{Name: asl.ErrTimeout, Cause: "slow"}}, wantOut: `{"in":1}`, wantCalls: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fn, calls := failing(c.errs...)
			e := env()
			clock := e.Clock.(*asl.VirtualClock)
			e.Integrations = map[string]asl.Integration{"r": fn}
			e.Rand = func() float64 { return c.rand }
			out, err := mustParse(t, task(c.retry, c.catch)).Run(context.Background(), json.RawMessage(`{"in":1}`), e)
			if c.wantOut != "" {
				if err != nil {
					t.Fatalf("%v\n%s", err, e.History)
				}
				jsonEq(t, out, c.wantOut)
			} else {
				var ae *asl.Error
				if !errors.As(err, &ae) || ae.Name != c.wantErr || ae.State != "T" {
					t.Fatalf("err = %v, want %s in T", err, c.wantErr)
				}
			}
			if calls.Load() != c.wantCalls {
				t.Fatalf("%d calls, want %d", calls.Load(), c.wantCalls)
			}
			if got := clock.Slept(); !reflect.DeepEqual(got, c.wantDelays) && !(len(got) == 0 && len(c.wantDelays) == 0) {
				t.Fatalf("delays %v, want %v", got, c.wantDelays)
			}
			if got := e.History.Retries("T"); got != len(c.wantDelays) {
				t.Fatalf("history has %d retries, want %d\n%s", got, len(c.wantDelays), e.History)
			}
		})
	}
}

func TestRuntimeErrorIsNeverCaught(t *testing.T) {
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","OutputPath":"$.missing",
		"Retry":[{"ErrorEquals":["States.ALL"]}],"Catch":[{"ErrorEquals":["States.ALL"],"Next":"H"}],"End":true},"H":{"Type":"Succeed"}}}`
	fn, calls := failing()
	e := env()
	e.Integrations = map[string]asl.Integration{"r": fn}
	_, err := mustParse(t, def).Run(context.Background(), json.RawMessage(`{}`), e)
	var ae *asl.Error
	if !errors.As(err, &ae) || ae.Name != asl.ErrRuntime || calls.Load() != 1 {
		t.Fatalf("err = %v after %d calls, want States.Runtime after 1", err, calls.Load())
	}
}

func TestTimeouts(t *testing.T) {
	t.Run("task", func(t *testing.T) {
		def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","TimeoutSeconds":30,
			"Catch":[{"ErrorEquals":["States.Timeout"],"Next":"H"}],"End":true},"H":{"Type":"Pass","Result":"timed out","End":true}}}`
		e := env()
		clock := e.Clock.(*asl.VirtualClock)
		e.Integrations = map[string]asl.Integration{"r": func(context.Context, *asl.Call) (json.RawMessage, error) {
			clock.Advance(31 * time.Second)
			return json.RawMessage(`"late"`), nil
		}}
		out, err := mustParse(t, def).Run(context.Background(), nil, e)
		if err != nil {
			t.Fatal(err)
		}
		jsonEq(t, out, `"timed out"`)
	})
	t.Run("execution", func(t *testing.T) {
		def := `{"TimeoutSeconds":60,"StartAt":"W","States":{"W":{"Type":"Wait","Seconds":61,"Next":"P"},"P":{"Type":"Succeed"}}}`
		_, err := mustParse(t, def).Run(context.Background(), nil, env())
		var ae *asl.Error
		if !errors.As(err, &ae) || ae.Name != asl.ErrTimeout || ae.State != "P" {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestWait(t *testing.T) {
	cases := []struct {
		name, fields, input string
		want                time.Duration
	}{
		{"Seconds", `"Seconds":90`, `{}`, 90 * time.Second},
		{"SecondsPath", `"SecondsPath":"$.w"`, `{"w":7}`, 7 * time.Second},
		{"Timestamp", `"Timestamp":"2026-03-01T13:00:00Z"`, `{}`, time.Hour},
		{"TimestampPath", `"TimestampPath":"$.at"`, `{"at":"2026-03-01T12:00:30Z"}`, 30 * time.Second},
		{"Timestamp in the past", `"Timestamp":"2020-01-01T00:00:00Z"`, `{}`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := env()
			clock := e.Clock.(*asl.VirtualClock)
			def := `{"StartAt":"W","States":{"W":{"Type":"Wait",` + c.fields + `,"End":true}}}`
			out, err := mustParse(t, def).Run(context.Background(), json.RawMessage(c.input), e)
			if err != nil {
				t.Fatal(err)
			}
			jsonEq(t, out, c.input)
			if got := clock.Now().Sub(t0); got != c.want {
				t.Fatalf("waited %s, want %s", got, c.want)
			}
		})
	}
	t.Run("SecondsPath not a number", func(t *testing.T) {
		def := `{"StartAt":"W","States":{"W":{"Type":"Wait","SecondsPath":"$.w","End":true}}}`
		_, err := mustParse(t, def).Run(context.Background(), json.RawMessage(`{"w":"soon"}`), env())
		var ae *asl.Error
		if !errors.As(err, &ae) || ae.Name != asl.ErrRuntime {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestMap(t *testing.T) {
	def := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$.items","MaxConcurrency":2,
		"ItemSelector":{"value.$":"$$.Map.Item.Value","index.$":"$$.Map.Item.Index","tag.$":"$.tag"},
		"ItemProcessor":{"ProcessorConfig":{"Mode":"INLINE"},"StartAt":"Work","States":{"Work":{"Type":"Task","Resource":"r","End":true}}},
		"ResultPath":"$.results","End":true}}}`
	var mu sync.Mutex
	running, peak := 0, 0
	e := env()
	e.Integrations = map[string]asl.Integration{"r": func(_ context.Context, c *asl.Call) (json.RawMessage, error) {
		mu.Lock()
		running++
		peak = max(peak, running)
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // let other iterations start, if the limit allowed them
		mu.Lock()
		running--
		mu.Unlock()
		var p struct {
			Value, Index int
			Tag          string
		}
		_ = json.Unmarshal(c.Parameters, &p)
		return json.RawMessage(fmt.Sprintf(`"%s-%d-%d"`, p.Tag, p.Index, p.Value*10)), nil
	}}
	out, err := mustParse(t, def).Run(context.Background(), json.RawMessage(`{"tag":"t","items":[1,2,3,4,5]}`), e)
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, out, `{"tag":"t","items":[1,2,3,4,5],"results":["t-0-10","t-1-20","t-2-30","t-3-40","t-4-50"]}`)
	if peak > 2 {
		t.Fatalf("%d iterations ran at once, MaxConcurrency is 2", peak)
	}
	if n := e.History.Count(asl.MapIterationEnded, "M"); n != 5 {
		t.Fatalf("%d iterations ended\n%s", n, e.History)
	}
	if p := e.History.Path("M[3]"); !reflect.DeepEqual(p, []string{"Work"}) {
		t.Fatalf("iteration 3 path %v", p)
	}
}

func TestMapFailureAndRetry(t *testing.T) {
	def := `{"StartAt":"M","States":{"M":{"Type":"Map","ItemsPath":"$",
		"Iterator":{"StartAt":"Work","States":{"Work":{"Type":"Task","Resource":"r","End":true}}},
		"Retry":[{"ErrorEquals":["Boom"],"MaxAttempts":1}],
		"Catch":[{"ErrorEquals":["States.ALL"],"Next":"Failed"}],"End":true},
		"Failed":{"Type":"Fail","ErrorPath":"$.Error","Cause":"map failed"}}}`
	var calls atomic.Int32
	e := env()
	e.Integrations = map[string]asl.Integration{"r": func(_ context.Context, c *asl.Call) (json.RawMessage, error) {
		calls.Add(1)
		if string(c.Parameters) == `"bad"` {
			return nil, &asl.Error{Name: "Boom", Cause: "bad item"}
		}
		return c.Parameters, nil
	}}
	_, err := mustParse(t, def).Run(context.Background(), json.RawMessage(`["ok","bad"]`), e)
	var ae *asl.Error
	if !errors.As(err, &ae) || ae.Name != "Boom" || ae.Cause != "map failed" || ae.State != "Failed" {
		t.Fatalf("err = %v\n%s", err, e.History)
	}
	if r := e.History.Retries("M"); r != 1 {
		t.Fatalf("Map retried %d times, want 1", r)
	}
	if got := e.History.Path(""); !reflect.DeepEqual(got, []string{"M", "Failed"}) {
		t.Fatalf("path %v", got)
	}
}

func TestParallel(t *testing.T) {
	def := `{"StartAt":"P","States":{"P":{"Type":"Parallel","Branches":[
		{"StartAt":"A","States":{"A":{"Type":"Pass","Parameters":{"a.$":"$.x"},"End":true}}},
		{"StartAt":"B","States":{"B":{"Type":"Pass","Result":"b","End":true}}}],"ResultPath":"$.both","End":true}}}`
	out, err := mustParse(t, def).Run(context.Background(), json.RawMessage(`{"x":1}`), env())
	if err != nil {
		t.Fatal(err)
	}
	jsonEq(t, out, `{"x":1,"both":[{"a":1},"b"]}`)
}

func TestFailState(t *testing.T) {
	def := `{"StartAt":"F","States":{"F":{"Type":"Fail","Error":"Campaign.Failed","CausePath":"States.Format('campaign {} failed', $.id)"}}}`
	e := env()
	_, err := mustParse(t, def).Run(context.Background(), json.RawMessage(`{"id":"c1"}`), e)
	var ae *asl.Error
	if !errors.As(err, &ae) || ae.Name != "Campaign.Failed" || ae.Cause != "campaign c1 failed" || ae.State != "F" {
		t.Fatalf("err = %v", err)
	}
	if e.History.Count(asl.ExecutionFailed, "") != 1 {
		t.Fatalf("no ExecutionFailed event\n%s", e.History)
	}
}

func TestContextCanceled(t *testing.T) {
	def := `{"StartAt":"T","States":{"T":{"Type":"Task","Resource":"r","Retry":[{"ErrorEquals":["States.ALL"],"MaxAttempts":99}],"End":true}}}`
	ctx, cancel := context.WithCancel(context.Background())
	e := env()
	e.Integrations = map[string]asl.Integration{"r": func(context.Context, *asl.Call) (json.RawMessage, error) {
		cancel()
		return nil, errors.New("fails")
	}}
	_, err := mustParse(t, def).Run(ctx, nil, e)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

func TestMachineIntrospection(t *testing.T) {
	m := mustParse(t, `{"StartAt":"A","States":{"A":{"Type":"Task","Resource":"x","Next":"M"},
		"M":{"Type":"Map","ItemProcessor":{"StartAt":"I","States":{"I":{"Type":"Task","Resource":"y","End":true}}},"End":true}}}`)
	if got := m.Resources(); !reflect.DeepEqual(got, []string{"x", "y"}) {
		t.Fatalf("Resources = %v", got)
	}
	if got := m.States(); !reflect.DeepEqual(got, []string{"A", "I", "M"}) {
		t.Fatalf("States = %v", got)
	}
	if r, ok := m.TaskResource("I"); !ok || r != "y" {
		t.Fatalf("TaskResource(I) = %q %v", r, ok)
	}
}
