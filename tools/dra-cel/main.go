// Command dra-cel answers, for every (expression, device) pair of a request, what the DRA allocator of
// Kubernetes would decide: the device matches, does not match, or the selector fails (compile or runtime
// error, which fails the allocation). It also parses quantities as Kubernetes does
// (k8s.io/apimachinery v0.37.2 pkg/api/resource ParseQuantity, what CEL's quantity() and a device's
// capacity use), so the Python quantity parser has the same oracle.
//
// It uses the allocator's own path: cel.NewCache(...).GetOrCompile (k8s.io/dynamic-resource-allocation
// v0.37.2, cel/cache.go: stored-expressions environment, cost estimation off) and
// CompilationResult.DeviceMatches (cel/compile.go), with the device's driver as the default domain, as
// structured/internal/stable/allocator_stable.go selectorsMatch calls it.
//
// Input on stdin:  {"features": {"consumableCapacity": bool, "listTypeAttributes": bool},
//
//	"expressions": ["..."], "devices": [{"driver": "...", "device": <ResourceSlice device entry>}],
//	"quantities": ["80Gi", ...]}
//
// Output: {"results": [[{"result": "match"|"no match"|"error", "class": "compile"|"runtime"|"",
// "message": "..."}, ... one per device], ... one per expression],
// "quantities": [{"value": "<exact decimal>"} | {"error": "..."}, ... one per quantity]}.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	dracel "k8s.io/dynamic-resource-allocation/cel"
)

type features struct {
	ConsumableCapacity bool `json:"consumableCapacity"`
	ListTypeAttributes bool `json:"listTypeAttributes"`
}

type device struct {
	Driver string             `json:"driver"`
	Device resourceapi.Device `json:"device"`
}

type request struct {
	Features    features `json:"features"`
	Expressions []string `json:"expressions"`
	Devices     []device `json:"devices"`
	Quantities  []string `json:"quantities"`
}

type parsed struct {
	Value string `json:"value,omitempty"`
	Error string `json:"error,omitempty"`
}

func quantities(in []string) []parsed {
	out := make([]parsed, 0, len(in))
	for _, s := range in {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			out = append(out, parsed{Error: err.Error()})
			continue
		}
		out = append(out, parsed{Value: q.AsDec().String()})
	}
	return out
}

type verdict struct {
	Result  string `json:"result"`
	Class   string `json:"class"`
	Message string `json:"message"`
}

func evaluate(req request) [][]verdict {
	cache := dracel.NewCache(len(req.Expressions)+1, dracel.Features{
		EnableConsumableCapacity: req.Features.ConsumableCapacity,
		EnableListTypeAttributes: req.Features.ListTypeAttributes,
	})
	out := make([][]verdict, 0, len(req.Expressions))
	for _, expr := range req.Expressions {
		compiled := cache.GetOrCompile(expr)
		row := make([]verdict, 0, len(req.Devices))
		for _, d := range req.Devices {
			if compiled.Error != nil {
				row = append(row, verdict{"error", "compile", compiled.Error.Error()})
				continue
			}
			matches, _, err := compiled.DeviceMatches(context.Background(), dracel.Device{
				Driver:                   d.Driver,
				AllowMultipleAllocations: d.Device.AllowMultipleAllocations,
				Attributes:               d.Device.Attributes,
				Capacity:                 d.Device.Capacity,
			})
			switch {
			case err != nil:
				row = append(row, verdict{"error", "runtime", dracel.EnhanceRuntimeError(err).Error()})
			case matches:
				row = append(row, verdict{"match", "", ""})
			default:
				row = append(row, verdict{"no match", "", ""})
			}
		}
		out = append(out, row)
	}
	return out
}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: dra-cel < request.json  (see the comment at the top of main.go)")
		os.Exit(2)
	}
	var req request
	dec := json.NewDecoder(os.Stdin)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		fmt.Fprintf(os.Stderr, "dra-cel: cannot read the request: %v\n", err)
		os.Exit(2)
	}
	if err := json.NewEncoder(os.Stdout).Encode(map[string]any{"results": evaluate(req), "quantities": quantities(req.Quantities)}); err != nil {
		fmt.Fprintf(os.Stderr, "dra-cel: %v\n", err)
		os.Exit(1)
	}
}
