package run

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Function is an AWS::Lambda::Function running under aws-lambda-rie: up to max environments,
// started as invocations need them.
type Function struct {
	LogicalID, Name, ARN, Role string
	Env                        []string // the process environment (template variables and Lambda's)
	Timeout                    time.Duration
	bin                        string
	rie                        string
	logw                       io.Writer
	log                        *slog.Logger

	mu   sync.Mutex
	idle []*instance
	all  []*instance
	max  int
	slot chan struct{}
}

type instance struct {
	cmd    *exec.Cmd
	exited chan error // cmd.Wait's result, once the process has ended
	url    string
	// ready is set once the emulator listens, stopping before the box kills the process itself:
	// an exit between the two is reported (one before listening is a port race, tried again).
	ready, stopping atomic.Bool
}

// FunctionError is an invocation that ended in the function's error (Lambda's
// X-Amz-Function-Error): its errorType and errorMessage.
type FunctionError struct {
	Type, Message string
}

func (e *FunctionError) Error() string { return e.Type + ": " + e.Message }

// startFunctions prepares every function of the template and starts one environment of each.
func (b *Box) startFunctions(ctx context.Context) error {
	for _, id := range b.Template.LogicalIDs("AWS::Lambda::Function") {
		p, err := b.props(id)
		if err != nil {
			return err
		}
		a := b.Resolver.Resources[id]
		name := a.Ref
		short := strings.TrimPrefix(name, stackName(b.Template)+"-")
		bin := filepath.Join(b.opts.BinDir, short, str(p["Handler"]))
		if str(p["Handler"]) == "" || !strings.HasPrefix(str(p["Runtime"]), "provided") {
			bin = filepath.Join(b.opts.BinDir, short, "bootstrap")
		}
		if _, err := os.Stat(bin); err != nil {
			return fmt.Errorf("function %s: %w", name, err)
		}
		role := str(p["Role"])
		akid, secret := b.Credentials(role)
		timeout := num(p["Timeout"], 3)
		env := []string{
			"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + b.dir, "TZ=:UTC", "LANG=en_US.UTF-8",
			"AWS_REGION=" + Region, "AWS_DEFAULT_REGION=" + Region,
			"AWS_ACCESS_KEY_ID=" + akid, "AWS_SECRET_ACCESS_KEY=" + secret, "AWS_EC2_METADATA_DISABLED=true",
			"AWS_LAMBDA_FUNCTION_NAME=" + name, "AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
			fmt.Sprintf("AWS_LAMBDA_FUNCTION_MEMORY_SIZE=%d", num(p["MemorySize"], 128)),
			fmt.Sprintf("AWS_LAMBDA_FUNCTION_TIMEOUT=%d", timeout),
			"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + name,
		}
		if e, ok := p["Environment"].(map[string]any); ok {
			vars, _ := e["Variables"].(map[string]any)
			for _, k := range sortedKeys(vars) {
				v := str(vars[k])
				if k == "HERALD_CONFIG_FILE" {
					// The config layer is mounted at /opt; the box keeps its copy elsewhere.
					v = filepath.Join(b.dir, "herald.yaml")
				}
				env = append(env, k+"="+v)
			}
		}
		for _, k := range sortedKeys(b.endpoints) {
			env = append(env, k+"="+b.endpoints[k])
		}
		f := &Function{LogicalID: id, Name: name, ARN: a.Attrs["Arn"], Role: role, Env: env, bin: bin, rie: b.opts.RIE,
			logw: b.logw, log: b.log, max: b.opts.MaxInstances, Timeout: time.Duration(timeout) * time.Second}
		f.slot = make(chan struct{}, f.max)
		b.Functions[name] = f
	}
	// One warm environment each, started in parallel.
	var wg sync.WaitGroup
	errs := make([]error, 0)
	var mu sync.Mutex
	for _, f := range b.Functions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in, err := f.start()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			f.mu.Lock()
			f.idle, f.all = append(f.idle, in), append(f.all, in)
			f.mu.Unlock()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// FunctionByARN finds a function by ARN (a qualified ARN names its function).
func (b *Box) FunctionByARN(arn string) (*Function, bool) {
	for _, f := range b.Functions {
		if arn == f.ARN || strings.HasPrefix(arn, f.ARN+":") || arn == f.Name {
			return f, true
		}
	}
	return nil, false
}

// Function returns the function whose name ends in -short (e.g. "api").
func (b *Box) Function(short string) *Function {
	for _, n := range sortedKeys(b.Functions) {
		if strings.HasSuffix(n, "-"+short) {
			return b.Functions[n]
		}
	}
	return nil
}

// handedOut are the addresses freeAddr gave: the kernel may hand a port it just freed to the
// next listener, and two emulators started side by side on one port would have one of them dial
// the other's.
var handedOut sync.Map

// freeAddr is a free 127.0.0.1 address no earlier call returned.
func freeAddr() (string, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := ln.Addr().String()
		ln.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free port on 127.0.0.1 in 100 tries")
}

type prefixWriter struct {
	mu     *sync.Mutex
	prefix string
	w      io.Writer
}

func (p prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			_, _ = io.WriteString(p.w, p.prefix+line)
		}
	}
	return len(b), nil
}

var logMu sync.Mutex

// start starts an execution environment: the emulator running the function's binary. A port
// taken between freeAddr and the emulator's bind makes the emulator exit at once; that is tried
// again on other ports, so a busy machine's port race does not fail the run.
func (f *Function) start() (*instance, error) {
	var err error
	for range 3 {
		var in *instance
		if in, err = f.startOnce(); err == nil {
			return in, nil
		}
	}
	return nil, err
}

func (f *Function) startOnce() (*instance, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(f.rie, "--runtime-interface-emulator-address", addr, "--runtime-api-address", api, f.bin)
	cmd.Dir = filepath.Dir(f.bin)
	cmd.Env = f.Env
	w := prefixWriter{mu: &logMu, prefix: f.Name + " | ", w: f.logw}
	cmd.Stdout, cmd.Stderr = w, w
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("function %s: %w", f.Name, err)
	}
	exited := make(chan error, 1)
	in := &instance{cmd: cmd, exited: exited, url: "http://" + addr + "/2015-03-31/functions/function/invocations"}
	go func() {
		err := cmd.Wait()
		if in.ready.Load() && !in.stopping.Load() && f.log != nil {
			// An environment that dies under an invocation loses it: its batch comes back only
			// after the queue's visibility timeout. Say so, with how it ended.
			f.log.Warn("stackbox: an execution environment exited", "function", f.Name, "pid", cmd.Process.Pid, "state", cmd.ProcessState.String(), "error", err)
		}
		exited <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			exited <- err // for kill
			return nil, fmt.Errorf("function %s: the emulator exited before listening on %s: %v", f.Name, addr, err)
		default:
		}
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			in.ready.Store(true)
			return in, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	in.kill()
	return nil, fmt.Errorf("function %s: the emulator is not listening after 20s", f.Name)
}

// kill ends the environment's process and waits for it.
func (in *instance) kill() {
	in.stopping.Store(true)
	_ = in.cmd.Process.Kill()
	err := <-in.exited
	in.exited <- err // a second kill returns at once
}

func (f *Function) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, in := range f.all {
		in.kill()
	}
	f.all, f.idle = nil, nil
}

// discard kills in and forgets it: an environment whose invocation failed below the function
// (the emulator unreachable or gone, no answer within the timeout) may still be running it, and
// the emulator takes one invocation at a time. Lambda, too, replaces such an environment.
func (f *Function) discard(in *instance) {
	in.kill()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = slices.DeleteFunc(f.all, func(x *instance) bool { return x == in })
}

// Invoke runs one invocation on an idle environment (starting one when all are busy and fewer
// than max run) and returns the function's response; a function error is a *FunctionError.
func (f *Function) Invoke(ctx context.Context, event any) (json.RawMessage, error) {
	raw, err := json.Marshal(event)
	if err != nil {
		return nil, err
	}
	select {
	case f.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-f.slot }()
	f.mu.Lock()
	var in *instance
	if n := len(f.idle); n > 0 {
		in, f.idle = f.idle[n-1], f.idle[:n-1]
	}
	f.mu.Unlock()
	if in == nil {
		if in, err = f.start(); err != nil {
			return nil, err
		}
		f.mu.Lock()
		f.all = append(f.all, in)
		f.mu.Unlock()
	}
	broken := false
	defer func() {
		if broken {
			f.discard(in)
			return
		}
		f.mu.Lock()
		f.idle = append(f.idle, in)
		f.mu.Unlock()
	}()
	// Lambda's timeout plus a margin for the emulator to answer.
	cctx, cancel := context.WithTimeout(ctx, f.Timeout+10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, in.url, bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		broken = true
		return nil, fmt.Errorf("invoke %s (pid %d): %w", f.Name, in.cmd.Process.Pid, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		broken = true
		return nil, fmt.Errorf("invoke %s (pid %d): %w", f.Name, in.cmd.Process.Pid, err)
	}
	var fe struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if resp.Header.Get("X-Amz-Function-Error") != "" || (json.Unmarshal(out, &fe) == nil && fe.ErrorType != "" && fe.ErrorMessage != "") {
		if fe.ErrorType == "" {
			fe.ErrorType = "Unhandled"
		}
		return nil, &FunctionError{Type: fe.ErrorType, Message: fe.ErrorMessage}
	}
	if resp.StatusCode >= 300 {
		return nil, fmt.Errorf("invoke %s: emulator answered %d: %s", f.Name, resp.StatusCode, out)
	}
	return out, nil
}

// Instances is how many environments each function started.
func (b *Box) Instances() map[string]int {
	out := map[string]int{}
	for n, f := range b.Functions {
		f.mu.Lock()
		out[n] = len(f.all)
		f.mu.Unlock()
	}
	return out
}
