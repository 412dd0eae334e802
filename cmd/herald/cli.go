package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

// Exit codes of herald (documented in its usage).
const (
	exitOK        = 0
	exitError     = 1 // the command failed: the API answered an error or could not be reached, …
	exitUsage     = 2 // bad flags or arguments
	exitNotDone   = 3 // campaign watch: the campaign ended CANCELED or FAILED
	defaultAPIURL = "http://127.0.0.1:8080"
	defaultAPIKey = "dev-demo-key"
)

// A command runs `herald <name> args…`, writing its output — and its usage, on -h, --help or
// help — to out. It returns flag.ErrHelp once it has printed its usage on request.
type command func(args []string, out io.Writer) error

// usageError is a mistake in the command line: main prints it with a pointer to `herald cmd -h`
// and exits 2.
type usageError struct {
	cmd string // "campaign create"; empty: the command main ran
	err error
}

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// usagef is a usage error of the command fs parses.
func usagef(fs *flag.FlagSet, format string, a ...any) error {
	return usageError{cmd: fs.Name(), err: fmt.Errorf(format, a...)}
}

// exitCodeError ends herald with code after printing its message.
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return e.msg }

// exitCode is the process exit code for a command's result.
func exitCode(err error) int {
	var ue usageError
	var ce exitCodeError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &ce):
		return ce.code
	default:
		return exitError
	}
}

// newFlagSet makes the flag set of `herald <name>`; its usage shows synopsis, about and the flags.
func newFlagSet(name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: herald %s %s\n", name, synopsis)
		if about != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(about))
		}
		fmt.Fprintf(w, "\nFlags:\n")
		fs.PrintDefaults()
	}
	return fs
}

// apiFlags adds --api and --key, which every command that talks to a running Herald takes.
func apiFlags(fs *flag.FlagSet, keyWhat string) (apiURL, key *string) {
	apiURL = fs.String("api", envOr("HERALD_API", defaultAPIURL), "Herald API base URL (env HERALD_API)")
	key = fs.String("key", envOr("HERALD_API_KEY", defaultAPIKey), keyWhat+" (env HERALD_API_KEY)")
	return apiURL, key
}

// parseFlags parses args into fs and returns the positional arguments. Flags may come before,
// between or after them ("--" ends the flags). -h, -help, --help, or "help" as the first
// argument print the usage to out and return flag.ErrHelp; a bad flag is a usageError.
func parseFlags(fs *flag.FlagSet, args []string, out io.Writer) ([]string, error) {
	help := func() ([]string, error) {
		fs.SetOutput(out)
		fs.Usage()
		return nil, flag.ErrHelp
	}
	if len(args) > 0 && args[0] == "help" {
		return help()
	}
	fs.SetOutput(io.Discard) // a parse error is reported once, by main
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			return help()
		}
		if err != nil {
			return nil, usageError{cmd: fs.Name(), err: err}
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// isHelp reports whether arg asks a command group for its usage.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// dispatch runs the subcommand args[0] of group, or prints the group's usage: to out when asked
// for, as a usage error when the subcommand is missing or unknown.
func dispatch(group, usage string, subs map[string]command, args []string, out io.Writer) error {
	if len(args) == 0 {
		return usageError{cmd: group, err: fmt.Errorf("want a subcommand\n\n%s", strings.TrimSpace(usage))}
	}
	if isHelp(args[0]) {
		fmt.Fprint(out, usage)
		return flag.ErrHelp
	}
	sub, ok := subs[args[0]]
	if !ok {
		return usageError{cmd: group, err: fmt.Errorf("unknown subcommand %q\n\n%s", args[0], strings.TrimSpace(usage))}
	}
	return sub(args[1:], out)
}

// isTerminal reports whether w is a terminal, where a progress line may redraw itself.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
