package main

// Would the real device plugin and GFD start with this config file? Both binaries' own start-up
// code decides (flag parsing with their defaults, loadConfig, validateFlags); a strict pass over
// upstream's Go types adds what upstream silently ignores (unknown or misspelt keys).

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/urfave/cli/v2"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"

	"github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle/mocknvml"
)

// validateRequest is one config file plus the device-plugin flags it runs with (e.g. the
// --mig-strategy / --mps-root the GPU Operator passes as environment variables).
type validateRequest struct {
	Config     string   `json:"config"`
	PluginArgs []string `json:"pluginArgs,omitempty"`
}

type validateResult struct {
	Valid           bool            `json:"valid"`           // upstream accepts it and the strict check found nothing
	UpstreamAccepts bool            `json:"upstreamAccepts"` // the real device plugin and GFD would start with it
	Error           string          `json:"error,omitempty"`
	Problems        []string        `json:"problems"` // strict-check findings (upstream itself ignores them)
	Warnings        []string        `json:"warnings"` // upstream's own warnings (e.g. ignored rename:)
	SharingStrategy string          `json:"sharingStrategy,omitempty"`
	Config          json.RawMessage `json:"config,omitempty"` // as the device plugin logs it at start-up ("Running with config")
}

func validateConfig(req validateRequest, logs *klogCapture) (*validateResult, error) {
	res := &validateResult{Problems: strictProblems([]byte(req.Config)), Warnings: []string{}}
	if res.Problems == nil {
		res.Problems = []string{}
	}
	dir, err := os.MkdirTemp("", "nvidia-oracle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(req.Config), 0o600); err != nil {
		return nil, err
	}

	// A mock NVML without GPUs: flag validation looks at NVML's presence, not at devices.
	srv := mocknvml.NewServer(nil, "", 0)
	infolib := newInfolib(srv, device.New(srv))

	var pluginConfig *spec.Config
	args := append([]string{"--config-file=" + cfgPath}, req.PluginArgs...)
	err = runPluginApp(args, func(c *cli.Context, flags []cli.Flag) error {
		config, err := pluginLoadConfig(c, flags)
		if err != nil {
			return fmt.Errorf("unable to load config: %v", err)
		}
		spec.DisableResourceNamingInConfig(config)
		if err := pluginValidateFlags(infolib, config); err != nil {
			return fmt.Errorf("unable to validate flags: %v", err)
		}
		pluginConfig = config
		return nil
	})
	if err == nil {
		// GFD reads the same file at its own start-up, with its own flag validation.
		err = runGFDApp([]string{"--config-file=" + cfgPath}, func(c *cli.Context, cfg *gfdConfig) error {
			_, err := cfg.loadConfig(c)
			if err != nil {
				return fmt.Errorf("gpu-feature-discovery: unable to load config: %v", err)
			}
			return nil
		})
	}
	res.Warnings = append(res.Warnings, logs.warnings()...)
	if err != nil {
		res.Error = tmpPath.ReplaceAllString(err.Error(), "$$TMPDIR")
		return res, nil
	}
	res.UpstreamAccepts = true
	res.SharingStrategy = string(pluginConfig.Sharing.SharingStrategy())
	res.Config, _ = json.Marshal(pluginConfig) // what upstream would run with (ignored keys dropped)
	if len(res.Problems) > 0 {
		res.Error = "strict parsing: " + strings.Join(res.Problems, "; ")
		return res, nil
	}
	res.Valid = true
	return res, nil
}
