// Command infra is Herald's CDK app: one stack per environment (`-c env=dev|prod`), defined from
// the same herald.yaml the runtime reads plus infra/env/<env>.yaml.
//
// Context (from `cdk -c key=value`, or CDK_CONTEXT_JSON when run with `go run .`):
//
//	env           environment name; infra/env/<env>.yaml must exist (default dev)
//	config        base herald.yaml (default <repo>/herald.yaml, else herald.example.yaml)
//	functionsDir  one Lambda per directory (default <repo>/functions)
//	lambdaAssets  prebuilt <name>/bootstrap per function (default <repo>/bin/lambda)
//	nag           "false" skips the cdk-nag AwsSolutions checks (default on)
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
	cdknag "github.com/cdklabs/cdk-nag-go/cdknag/v2"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "herald infra:", err)
		jsii.Close()
		os.Exit(1)
	}
	jsii.Close()
}

func run() error {
	props := &awscdk.AppProps{}
	if os.Getenv("CDK_OUTDIR") == "" {
		// Run without the CLI (make synth): write the assembly where `cdk deploy --app` finds it.
		props.Outdir = jsii.String("cdk.out")
	}
	app := awscdk.NewApp(props)
	root, err := repoRoot()
	if err != nil {
		return err
	}
	ctx := func(key, def string) string {
		if v, ok := app.Node().TryGetContext(jsii.String(key)).(string); ok && v != "" {
			return v
		}
		return def
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(root, p)
	}

	envName := ctx("env", "dev")
	cfgPath := ctx("config", "")
	if cfgPath == "" {
		cfgPath = filepath.Join(root, "herald.yaml")
		if _, err := os.Stat(cfgPath); err != nil {
			cfgPath = filepath.Join(root, "herald.example.yaml")
			fmt.Fprintln(os.Stderr, "herald infra: no herald.yaml at the repository root; using herald.example.yaml")
		}
	}
	env, err := Load(envName, abs(cfgPath), filepath.Join(root, "infra", "env"))
	if err != nil {
		return err
	}
	functions, err := DiscoverFunctions(abs(ctx("functionsDir", "functions")))
	if err != nil {
		return err
	}
	staging, err := os.MkdirTemp("", "herald-infra-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(staging)

	stackProps := awscdk.StackProps{
		Description: jsii.String("Herald notification stack (" + envName + ")"),
		Env:         stackEnv(env.Settings),
	}
	stack, err := NewHeraldStack(app, "herald-"+envName, &HeraldProps{
		StackProps: stackProps,
		Env:        env,
		Functions:  functions,
		AssetDir:   abs(ctx("lambdaAssets", filepath.Join("bin", "lambda"))),
		StagingDir: staging,
	})
	if err != nil {
		return err
	}
	if ctx("nag", "true") != "false" {
		awscdk.Aspects_Of(app).Add(cdknag.NewAwsSolutionsChecks(&cdknag.NagPackProps{Verbose: jsii.Bool(true)}), nil)
	}
	asm := app.Synth(nil)

	// The CLI prints annotations itself; without it, say what matters. Errors fail either way.
	messages, err := synthMessages(*asm.Directory(), *stack.ArtifactId())
	if err != nil {
		return err
	}
	errors := 0
	for _, m := range messages {
		if m.level == "error" {
			errors++
		}
		if os.Getenv("CDK_OUTDIR") == "" {
			fmt.Fprintf(os.Stderr, "%s %s: %s\n", strings.ToUpper(m.level), m.path, m.text)
		}
	}
	if errors > 0 {
		return fmt.Errorf("%d error annotation(s) in %s (cdk-nag findings need a fix or a justified suppression in infra/nag.go)", errors, *stack.StackName())
	}
	if os.Getenv("CDK_OUTDIR") == "" {
		fmt.Fprintf(os.Stderr, "herald infra: synthesized %s (%d functions) into %s\n", *stack.StackName(), len(functions), *asm.Directory())
	}
	return nil
}

// stackEnv pins the stack to an account and region when the environment file says so; otherwise
// the stack is environment-agnostic and the CLI's credentials decide at deploy time.
func stackEnv(s Settings) *awscdk.Environment {
	if s.Account == "" && s.Region == "" {
		return nil
	}
	e := &awscdk.Environment{}
	if s.Account != "" {
		e.Account = jsii.String(s.Account)
	}
	if s.Region != "" {
		e.Region = jsii.String(s.Region)
	}
	return e
}

// repoRoot is the nearest directory upwards holding cdk.json (the app runs from infra/).
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "cdk.json")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no cdk.json in %s or above: run from the repository or its infra/ directory", dir)
		}
	}
}

type synthMessage struct{ level, path, text string }

// synthMessages reads the warnings and errors recorded for an artifact from the cloud assembly in
// dir (manifest metadata, and the separate <artifact>.metadata.json newer assemblies write).
func synthMessages(dir, artifact string) ([]synthMessage, error) {
	type entry struct {
		Type string `json:"type"`
		Data any    `json:"data"`
	}
	var all []map[string][]entry
	var manifest struct {
		Artifacts map[string]struct {
			Metadata               map[string][]entry `json:"metadata"`
			AdditionalMetadataFile string             `json:"additionalMetadataFile"`
		} `json:"artifacts"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("read cloud assembly: %w", err)
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		return nil, fmt.Errorf("read cloud assembly: %w", err)
	}
	a := manifest.Artifacts[artifact]
	all = append(all, a.Metadata)
	if a.AdditionalMetadataFile != "" {
		var extra map[string][]entry
		b, err := os.ReadFile(filepath.Join(dir, a.AdditionalMetadataFile))
		if err != nil {
			return nil, fmt.Errorf("read cloud assembly: %w", err)
		}
		if err := json.Unmarshal(b, &extra); err != nil {
			return nil, fmt.Errorf("read %s: %w", a.AdditionalMetadataFile, err)
		}
		all = append(all, extra)
	}
	var out []synthMessage
	for _, md := range all {
		for _, path := range sortedKeys(md) {
			for _, e := range md[path] {
				if level, ok := strings.CutPrefix(e.Type, "aws:cdk:"); ok && (level == "error" || level == "warning") {
					out = append(out, synthMessage{level, path, fmt.Sprint(e.Data)})
				}
			}
		}
	}
	return out, nil
}
