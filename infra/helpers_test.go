package main

// CDK tests share one jsii runtime, which is not goroutine-safe: no t.Parallel() in this package.
// Each environment is synthesized once (with the cdk-nag AwsSolutions pack applied) and the
// template is shared by the tests that read it.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/aws-cdk-go/awscdk/v2/assertions"
	"github.com/aws/jsii-runtime-go"
	cdknag "github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

// repoFunctions are the repository's functions, one per directory under functions/: the tests
// synthesize what `make synth` deploys, so adding a function changes what they check. (Each gets
// a fake bootstrap in a scratch layout: the tests never build the binaries.)
var repoFunctions = func() []string {
	names, err := DiscoverFunctions(filepath.Join("..", "functions"))
	if err != nil || len(names) == 0 {
		panic(fmt.Sprintf("no functions under ../functions (%v): the infra tests synthesize the repository's functions", err))
	}
	return names
}()

// without returns names less drop.
func without(names []string, drop ...string) []string {
	var out []string
	for _, n := range names {
		if !slices.Contains(drop, n) {
			out = append(out, n)
		}
	}
	return out
}

var (
	scratch string                    // removed by TestMain
	synths  = map[string]*synthesis{} // by cache key
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "herald-infra-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	code := m.Run()
	jsii.Close()
	os.RemoveAll(dir)
	os.Exit(code)
}

// synthesis is one synthesized environment.
type synthesis struct {
	env       *Environment
	stack     awscdk.Stack
	template  assertions.Template
	resources map[string]map[string]any // logical id → resource
	functions []string
}

// layout creates functions/<name>/ and <assets>/<name>/bootstrap for names under a fresh dir.
func layout(t *testing.T, names []string) (functionsDir, assetDir string) {
	t.Helper()
	root, err := os.MkdirTemp(scratch, "layout-")
	if err != nil {
		t.Fatal(err)
	}
	functionsDir, assetDir = filepath.Join(root, "functions"), filepath.Join(root, "bin", "lambda")
	for _, n := range names {
		for _, d := range []string{filepath.Join(functionsDir, n), filepath.Join(assetDir, n)} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(functionsDir, n, "main.go"), []byte("package main\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(assetDir, n, "bootstrap"), []byte("not a real binary: "+n), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Noise discovery must ignore.
	_ = os.WriteFile(filepath.Join(functionsDir, "README.md"), []byte("x"), 0o644)
	_ = os.MkdirAll(filepath.Join(functionsDir, ".cache"), 0o755)
	return functionsDir, assetDir
}

func loadEnv(t *testing.T, name string) *Environment {
	t.Helper()
	env, err := Load(name, filepath.Join("..", "herald.example.yaml"), "env")
	if err != nil {
		t.Fatalf("load environment %s: %v", name, err)
	}
	return env
}

// synth returns environment env synthesized with the repository's functions (cached).
func synth(t *testing.T, env string) *synthesis {
	return synthWith(t, env, repoFunctions)
}

func synthWith(t *testing.T, env string, names []string) *synthesis {
	t.Helper()
	if s, ok := synths[env+":"+strings.Join(names, ",")]; ok {
		return s
	}
	return synthEnv(t, loadEnv(t, env), names)
}

// synthEnv synthesizes environment e with functions names (cached by e.Name and names).
func synthEnv(t *testing.T, e *Environment, names []string) *synthesis {
	t.Helper()
	env := e.Name
	key := env + ":" + strings.Join(names, ",")
	if s, ok := synths[key]; ok {
		return s
	}
	functionsDir, assetDir := layout(t, names)
	discovered, err := DiscoverFunctions(functionsDir)
	if err != nil {
		t.Fatal(err)
	}
	staging, err := os.MkdirTemp(scratch, "staging-")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.MkdirTemp(scratch, "cdk.out-")
	if err != nil {
		t.Fatal(err)
	}
	app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(out)})
	stack, err := NewHeraldStack(app, "herald-"+env, &HeraldProps{
		Env: e, Functions: discovered, AssetDir: assetDir, StagingDir: staging,
	})
	if err != nil {
		t.Fatalf("NewHeraldStack(%s): %v", env, err)
	}
	awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Reports: jsii.Bool(false)}), nil)
	tpl := assertions.Template_FromStack(stack, nil)
	b, err := json.Marshal(tpl.ToJSON())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Resources map[string]map[string]any
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	s := &synthesis{env: e, stack: stack, template: tpl, resources: doc.Resources, functions: discovered}
	synths[key] = s
	return s
}

// environments runs f for dev and prod as subtests.
func environments(t *testing.T, f func(t *testing.T, s *synthesis)) {
	for _, env := range []string{"dev", "prod"} {
		t.Run(env, func(t *testing.T) { f(t, synth(t, env)) })
	}
}

// ofType returns the logical ids of resources of type typ, sorted.
func (s *synthesis) ofType(typ string) []string {
	var ids []string
	for id, r := range s.resources {
		if r["Type"] == typ {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	return ids
}

func (s *synthesis) props(id string) map[string]any {
	p, _ := s.resources[id]["Properties"].(map[string]any)
	return p
}

// idByProp finds the resource of type typ whose property key equals value.
func (s *synthesis) idByProp(t *testing.T, typ, key, value string) string {
	t.Helper()
	for _, id := range s.ofType(typ) {
		if s.props(id)[key] == value {
			return id
		}
	}
	t.Fatalf("no %s with %s = %q", typ, key, value)
	return ""
}

// ref returns the logical id a {"Ref": id} or {"Fn::GetAtt": [id, attr]} points at.
func ref(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return ""
	}
	if r, ok := m["Ref"].(string); ok {
		return r
	}
	if g, ok := m["Fn::GetAtt"].([]any); ok && len(g) > 0 {
		id, _ := g[0].(string)
		return id
	}
	return ""
}

// list turns a scalar-or-list CloudFormation value into a list.
func list(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	if v == nil {
		return nil
	}
	return []any{v}
}

func num(v any) float64 {
	switch n := v.(type) {
	case float64:
		return n
	case json.Number:
		f, _ := n.Float64()
		return f
	case string:
		var f float64
		fmt.Sscan(n, &f)
		return f
	}
	return 0
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// pseudo are the values CloudFormation's pseudo parameters are given when a test reads a
// generated name: the longest each can be (a 16-character region is planned for).
var pseudo = map[string]string{
	"AWS::AccountId": "123456789012", "AWS::Region": "xx-xxxxxxxxx-1", "AWS::Partition": "aws-iso-b",
	"AWS::URLSuffix": "amazonaws.com", "AWS::StackName": "herald-stack",
}

// flatten renders a CloudFormation string value — a literal or an Fn::Join — with pseudo
// parameters filled in and any other reference as <ref:Id>; ok is false for other values.
func flatten(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case map[string]any:
		if r, ok := x["Ref"].(string); ok {
			if p, ok := pseudo[r]; ok {
				return p, true
			}
			return "<ref:" + r + ">", true
		}
		if g, ok := x["Fn::GetAtt"].([]any); ok && len(g) > 0 {
			return fmt.Sprintf("<ref:%v>", g[0]), true
		}
		if j, ok := x["Fn::Join"].([]any); ok && len(j) == 2 {
			sep, _ := j[0].(string)
			var parts []string
			for _, p := range list(j[1]) {
				s, ok := flatten(p)
				if !ok {
					return "", false
				}
				parts = append(parts, s)
			}
			return strings.Join(parts, sep), true
		}
	}
	return "", false
}
