package main

import (
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2/awslambda"

	"herald/internal/cost"
)

// herald bench cost bills Lambda at the memory sizes and on the architecture this stack deploys
// with: internal/cost's table must say what infra's defaults say.
func TestCostTableMatchesFunctionDefaults(t *testing.T) {
	for name, d := range defaultFunctionSettings {
		if got := cost.MemoryMB(name); got != d.MemoryMB {
			t.Errorf("function %s: internal/cost bills %d MB, infra deploys %d MB", name, got, d.MemoryMB)
		}
	}
	for name := range cost.FunctionMemoryMB {
		if _, ok := defaultFunctionSettings[name]; !ok {
			t.Errorf("internal/cost names function %s, which infra has no default for", name)
		}
	}
	// Every function of the repository, those without a default of their own too.
	for _, name := range append(repoFunctions, "a-function-with-no-default") {
		if got, want := (Settings{}).Function(name).MemoryMB, cost.MemoryMB(name); got != want {
			t.Errorf("function %s: infra deploys %d MB, internal/cost bills %d MB", name, got, want)
		}
	}
	if arch := *awslambda.Architecture_ARM_64().Name(); cost.USEast1.Architecture != arch {
		t.Errorf("internal/cost prices Lambda on %s, infra deploys %s", cost.USEast1.Architecture, arch)
	}
}
