package asl

import (
	"fmt"
	"slices"
)

// Error is a failure as Step Functions names it: a state's error (which Retry and Catch match
// on its Name) and, returned by Run, the execution's failure.
//
// An Integration returns an *Error to fail its task with a chosen name — a Lambda function's
// errorType, "Lambda.ServiceException", "StepFunctions.ExecutionAlreadyExistsException" —; any
// other error fails the task as States.TaskFailed with the error's text as the cause.
type Error struct {
	Name  string
	Cause string
	// State is the state the error ended the execution in (set on the error Run returns).
	State string
}

func (e *Error) Error() string {
	if e.State != "" {
		return fmt.Sprintf("%s in state %q: %s", e.Name, e.State, e.Cause)
	}
	return fmt.Sprintf("%s: %s", e.Name, e.Cause)
}

// Error names Step Functions defines.
const (
	// ErrAll in ErrorEquals matches every error but States.Runtime.
	ErrAll = "States.ALL"
	// ErrTaskFailed in ErrorEquals matches every error but States.Timeout and States.Runtime.
	ErrTaskFailed = "States.TaskFailed"
	ErrTimeout    = "States.Timeout"
	// ErrRuntime fails the execution whatever the Retry and Catch (a path that is not in the
	// input, a Choice variable that is missing): Step Functions never retries or catches it.
	ErrRuntime                = "States.Runtime"
	ErrParameterPathFailure   = "States.ParameterPathFailure"
	ErrResultPathMatchFailure = "States.ResultPathMatchFailure"
	ErrIntrinsicFailure       = "States.IntrinsicFailure"
	ErrNoChoiceMatched        = "States.NoChoiceMatched"
	ErrBranchFailed           = "States.BranchFailed"

	// Lambda's errors as the Lambda integrations raise them.
	ErrLambdaService = "Lambda.ServiceException"
	ErrLambdaUnknown = "Lambda.Unknown"
)

func runtimeErrorf(format string, args ...any) *Error {
	return &Error{Name: ErrRuntime, Cause: fmt.Sprintf(format, args...)}
}

// matches reports whether ErrorEquals matches the error name, with Step Functions' wildcards.
func matches(errorEquals []string, name string) bool {
	if name == ErrRuntime {
		return false
	}
	return slices.ContainsFunc(errorEquals, func(e string) bool {
		return e == name || e == ErrAll || (e == ErrTaskFailed && name != ErrTimeout)
	})
}

// LambdaFunctionError is the task error of a Lambda function that returned an error, as Step
// Functions reports it: the function's errorType names the error, and the cause is the
// function's error object as JSON.
func LambdaFunctionError(errorType, errorMessage string) *Error {
	cause, _ := encode(map[string]any{"errorType": errorType, "errorMessage": errorMessage})
	return &Error{Name: errorType, Cause: string(cause)}
}
