// Command nvidia-oracle answers "what would NVIDIA's node agents publish for this node?" with
// NVIDIA's own code rather than a re-implementation: GPU Feature Discovery's labelers
// (internal/lm), the device plugin's resource managers (internal/rm, internal/plugin) and the
// config-file API (api/config/v1) of github.com/NVIDIA/k8s-device-plugin, run against a mock
// NVML built from the request with go-nvml's generated mocks (pkg/nvml/mock).
//
// Why this module is called github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle: Go allows
// importing an internal/ package only from code whose import path lies under the internal
// directory's parent. The path is never published; it exists so the pinned upstream module can be
// an ordinary, checksum-verified dependency (go.mod / go.sum) instead of a copied tree.
//
// Why zz_upstream_*.go do not exist in the repository: the start-up code of the two upstream
// binaries (flag definitions and defaults, loadConfig, validateFlags) lives in their
// `package main`, which nothing can import. At build time ./extract copies it, verbatim apart from
// renamed identifiers, out of the module cache into a temporary folder, and `go build -overlay`
// adds those files to this package (see tools/README.md). Upstream code is never committed.
//
// Subcommands (JSON on stdin and stdout; errors on stderr):
//
//	nvidia-oracle batch [-v]      < {"items": [{"node": {...}} | {"validateConfig": {...}}, ...]}
//	nvidia-oracle node [-v]       < node request
//	nvidia-oracle validate-config [device-plugin flags...] < config file
//	nvidia-oracle version
//
// Exit codes: 0 done; 1 it failed (for `node` / `validate-config` also: the agents would not
// start / the config is invalid; the JSON says why); 2 bad usage or an unreadable request.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/NVIDIA/k8s-device-plugin/internal/info"
)

// batchRequest is the input of `batch`: many nodes and configs in one process start.
type batchRequest struct {
	Items []batchItem `json:"items"`
}

// batchItem is one question: exactly one of its fields is set.
type batchItem struct {
	Node           *nodeRequest     `json:"node,omitempty"`
	ValidateConfig *validateRequest `json:"validateConfig,omitempty"`
}

// batchItemResult answers the item at the same index. Error is set when the item itself could not
// be answered (e.g. a MIG profile NVIDIA would name differently); an agent refusing to start is
// not an Error but part of the node's answer.
type batchItemResult struct {
	Node           *nodeResult     `json:"node,omitempty"`
	ValidateConfig *validateResult `json:"validateConfig,omitempty"`
	Error          string          `json:"error,omitempty"`
}

type batchResponse struct {
	Results []batchItemResult `json:"results"`
}

// usageError is bad input from the caller (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// exitCode is the status of the sandboxed child, which has already printed its own output.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "batch":
		err = cmdBatch(os.Args[2:])
	case "node":
		err = cmdNode(os.Args[2:])
	case "validate-config":
		err = cmdValidateConfig(os.Args[2:])
	case "version":
		printVersion()
	default:
		usage()
	}
	var exit exitCode
	var bad usageError
	var setup sandboxSetupError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		os.Exit(int(exit))
	case errors.As(err, &setup):
		fmt.Fprintln(os.Stderr, "nvidia-oracle:", err)
		os.Exit(sandboxSetupFailed) // tells the parent to try the next kind of namespace
	case errors.As(err, &bad):
		fmt.Fprintln(os.Stderr, "nvidia-oracle:", err)
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, "nvidia-oracle:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: nvidia-oracle batch [-v] < batch.json")
	fmt.Fprintln(os.Stderr, "       nvidia-oracle node [-v] < request.json")
	fmt.Fprintln(os.Stderr, "       nvidia-oracle validate-config [device-plugin flags...] < config.yaml")
	fmt.Fprintln(os.Stderr, "       nvidia-oracle version")
	os.Exit(2)
}

// printVersion names the upstream code this binary runs: internal/info.version is stamped with -X
// at build time (as upstream's Makefile does); module versions come from the build info.
func printVersion() {
	fmt.Printf("k8s-device-plugin %s\n", info.GetVersionString())
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if strings.HasPrefix(m.Path, "github.com/NVIDIA/") {
				fmt.Printf("%s %s\n", m.Path, m.Version)
			}
		}
	}
}

// cmdBatch answers every item of a batchRequest in one process (one sandbox for all nodes).
func cmdBatch(args []string) error {
	verbose, err := parseVerbose("batch", args)
	if err != nil {
		return err
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	var req batchRequest
	if err := decodeStrict(input, &req); err != nil {
		return usageError{fmt.Sprintf("batch request: %v", err)}
	}
	for i, item := range req.Items {
		if (item.Node == nil) == (item.ValidateConfig == nil) {
			return usageError{fmt.Sprintf("batch request: items[%d] must have exactly one of node, validateConfig", i)}
		}
	}
	logs := setupKlog(verbose)
	run := func(sb *sandbox) error {
		out := batchResponse{Results: make([]batchItemResult, len(req.Items))}
		for i, item := range req.Items {
			logs.reset()
			if item.ValidateConfig != nil {
				res, err := validateConfig(*item.ValidateConfig, logs)
				if err != nil {
					return err
				}
				out.Results[i].ValidateConfig = res
				continue
			}
			res, err := answerNode(sb, *item.Node, logs)
			var bad usageError
			switch {
			case errors.As(err, &bad):
				out.Results[i].Error = bad.msg
			case err != nil:
				return fmt.Errorf("items[%d]: %w", i, err)
			default:
				out.Results[i].Node = res
			}
		}
		printJSON(out)
		return nil
	}
	for _, item := range req.Items {
		if item.Node != nil {
			return withSandbox(input, run)
		}
	}
	return run(nil) // config validation reads nothing from the host
}

// cmdNode answers one node request (for use by hand); exit 1 when an agent would not start.
func cmdNode(args []string) error {
	verbose, err := parseVerbose("node", args)
	if err != nil {
		return err
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	var req nodeRequest
	if err := decodeStrict(input, &req); err != nil {
		return usageError{fmt.Sprintf("node request: %v", err)}
	}
	logs := setupKlog(verbose)
	return withSandbox(input, func(sb *sandbox) error {
		res, err := answerNode(sb, req, logs)
		if err != nil {
			return err
		}
		printJSON(res)
		if len(res.Errors) > 0 {
			return fmt.Errorf("%d agent(s) would not start: %v", len(res.Errors), res.Errors)
		}
		return nil
	})
}

// cmdValidateConfig checks one config file (exit 1 when upstream or the strict check rejects it).
func cmdValidateConfig(args []string) error {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	res, err := validateConfig(validateRequest{Config: string(raw), PluginArgs: args}, setupKlog(false))
	if err != nil {
		return err
	}
	printJSON(res)
	if !res.Valid {
		return errors.New(res.Error)
	}
	return nil
}

func parseVerbose(cmd string, args []string) (bool, error) {
	switch {
	case len(args) == 0:
		return false, nil
	case len(args) == 1 && args[0] == "-v":
		return true, nil
	}
	return false, usageError{fmt.Sprintf("%s: unknown arguments %q (only -v: copy upstream's log to stderr)", cmd, args)}
}

// decodeStrict rejects unknown fields: a misspelt request key must not be silently ignored.
func decodeStrict(input []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(input)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON document")
	}
	return nil
}

func printJSON(v any) {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
