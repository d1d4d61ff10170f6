package main

// What GFD and the device plugin publish for one simulated node: each agent's own start-up path
// (upstream's flag set, loadConfig, validateFlags) and then the code its daemon loop runs once.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	nvinfo "github.com/NVIDIA/go-nvlib/pkg/nvlib/info"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/urfave/cli/v2"

	spec "github.com/NVIDIA/k8s-device-plugin/api/config/v1"
	"github.com/NVIDIA/k8s-device-plugin/internal/lm"
	"github.com/NVIDIA/k8s-device-plugin/internal/plugin"
	"github.com/NVIDIA/k8s-device-plugin/internal/resource"
	"github.com/NVIDIA/k8s-device-plugin/internal/rm"
	"github.com/NVIDIA/k8s-device-plugin/internal/vgpu"

	"github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle/mocknvml"
)

// Agent names used as keys of nodeResult.Errors.
const (
	agentGFD    = "gpu-feature-discovery"
	agentPlugin = "nvidia-device-plugin"
)

// nodeRequest describes one node as its agents see it.
type nodeRequest struct {
	GPUs              []mocknvml.GPURequest `json:"gpus"`
	Config            string                `json:"config,omitempty"`      // device-plugin config file (YAML or JSON); empty: none
	DriverVersion     string                `json:"driverVersion"`         // e.g. "580.95.05"
	CudaDriverVersion int                   `json:"cudaDriverVersion"`     // NVML encoding, e.g. 13000 for 13.0
	MigStrategy       string                `json:"migStrategy,omitempty"` // --mig-strategy for both agents (the GPU Operator sets MIG_STRATEGY)
	MachineType       string                `json:"machineType,omitempty"` // DMI product name GFD reads; empty: file absent
	Timestamp         bool                  `json:"timestamp,omitempty"`   // keep nvidia.com/gfd.timestamp (not deterministic)
	PluginArgs        []string              `json:"pluginArgs,omitempty"`  // extra device-plugin flags, e.g. "--mps-root=/run/nvidia/mps"
	GFDArgs           []string              `json:"gfdArgs,omitempty"`     // extra GFD flags
	// NVMLLibrary: answer through this NVML library (the NVML stub, nvmlstub/) instead of the mock
	// directly. The library is handed the same GPUs in its config file, so an answer that differs
	// from the mock's is a fault in the library's C interface.
	NVMLLibrary string `json:"nvmlLibrary,omitempty"`
}

// nodeResult is what the node's agents publish.
type nodeResult struct {
	Labels    map[string]string `json:"labels"`    // what GFD writes (empty if GFD would not start)
	Resources map[string]int    `json:"resources"` // what the device plugin advertises (empty if it would not start)
	// Errors: an agent that would not start (bad config, ...) publishes nothing; its pod would
	// crash-loop. Keyed by agent: gpu-feature-discovery, nvidia-device-plugin.
	Errors map[string]string `json:"errors"`
	// Warnings logged by upstream code (klog W/E lines) and config keys upstream ignores.
	Warnings []string `json:"warnings"`
}

func answerNode(sb *sandbox, req nodeRequest, logs *klogCapture) (*nodeResult, error) {
	gpus, err := mocknvml.ExpandGPUs(req.GPUs)
	if err != nil {
		return nil, usageError{fmt.Sprintf("request: %v", err)}
	}
	if err := sb.populate(gpus); err != nil {
		return nil, err
	}
	res, err := computeNode(req, gpus)
	if err != nil {
		return nil, err
	}
	res.Warnings = append(res.Warnings, logs.warnings()...)
	res.Warnings = append(res.Warnings, prefixAll("config: ", strictProblems([]byte(req.Config)))...)
	return res, nil
}

func computeNode(req nodeRequest, gpus []*mocknvml.GPU) (res *nodeResult, err error) {
	defer func() {
		// The generated mock panics when upstream calls an NVML function it does not set.
		if r := recover(); r != nil {
			err = fmt.Errorf("mock NVML: %v", r)
		}
	}()
	srv := mocknvml.NewServer(gpus, req.DriverVersion, req.CudaDriverVersion)
	if err := srv.CheckProfileNames(); err != nil {
		return nil, usageError{err.Error()}
	}
	dir, err := os.MkdirTemp("", "nvidia-oracle-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	nvmllib := nvml.Interface(srv)
	if req.NVMLLibrary != "" {
		if nvmllib, err = stubLibrary(req, dir); err != nil {
			return nil, err
		}
	}
	devicelib := device.New(nvmllib)
	infolib := newInfolib(nvmllib, devicelib)
	var common []string
	if req.Config != "" {
		p := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(p, []byte(req.Config), 0o600); err != nil {
			return nil, err
		}
		common = append(common, "--config-file="+p)
	}
	if req.MigStrategy != "" {
		common = append(common, "--mig-strategy="+req.MigStrategy)
	}
	machineTypeFile := filepath.Join(dir, "product_name") // absent unless given, as on a VM without DMI
	if req.MachineType != "" {
		if err := os.WriteFile(machineTypeFile, []byte(req.MachineType+"\n"), 0o600); err != nil {
			return nil, err
		}
	}

	res = &nodeResult{Labels: map[string]string{}, Resources: map[string]int{}, Errors: map[string]string{}, Warnings: []string{}}

	// GPU Feature Discovery: cmd/gpu-feature-discovery start() and one pass of gfd.run(). The
	// labels are taken where gfd.run() hands them to its outputer, so neither the output file nor
	// the NodeFeature API (on by default since v0.19.0) is involved.
	gfdArgs := append([]string{"--oneshot", "--output-file=", "--use-node-feature-api=false",
		"--machine-type-file=" + machineTypeFile}, common...)
	if !req.Timestamp {
		gfdArgs = append(gfdArgs, "--no-timestamp")
	}
	gfdArgs = append(gfdArgs, req.GFDArgs...)
	err = runGFDApp(gfdArgs, func(c *cli.Context, cfg *gfdConfig) error {
		config, err := cfg.loadConfig(c)
		if err != nil {
			return fmt.Errorf("unable to load config: %v", err)
		}
		spec.DisableResourceNamingInConfig(config)
		manager, err := resource.NewManager(infolib, nvmllib, devicelib, config)
		if err != nil {
			return fmt.Errorf("failed to create resource manager: %w", err)
		}
		// The sandbox put the simulated PCI devices where upstream's sysfs reader looks.
		loopLabelers, err := lm.NewLabelers(manager, vgpu.NewVGPULib(vgpu.NewNvidiaPCILib()), config)
		if err != nil {
			return err
		}
		labels, err := lm.Merge(lm.NewTimestampLabeler(config), loopLabelers).Labels()
		if err != nil {
			return fmt.Errorf("error generating labels: %v", err)
		}
		res.Labels = labels
		return nil
	})
	if err != nil {
		res.Errors[agentGFD] = err.Error()
		res.Labels = map[string]string{}
	}

	// NVIDIA device plugin: cmd/nvidia-device-plugin startPlugins() up to serving.
	pluginArgs := append(append([]string{}, common...), req.PluginArgs...)
	err = runPluginApp(pluginArgs, func(c *cli.Context, flags []cli.Flag) error {
		config, err := pluginLoadConfig(c, flags)
		if err != nil {
			return fmt.Errorf("unable to load config: %v", err)
		}
		spec.DisableResourceNamingInConfig(config)
		if err := pluginValidateFlags(infolib, config); err != nil {
			return fmt.Errorf("unable to validate flags: %v", err)
		}
		if err := rm.AddDefaultResourcesToConfig(infolib, nvmllib, devicelib, config); err != nil {
			return fmt.Errorf("unable to add default resources to config: %v", err)
		}
		deviceListStrategies, err := spec.NewDeviceListStrategies(*config.Flags.Plugin.DeviceListStrategy)
		if err != nil {
			return fmt.Errorf("invalid device list strategy: %v", err)
		}
		// plugin.New is what GetPlugins calls; it also rejects e.g. MPS on MIG devices. CDI spec
		// generation and IMEX channel discovery are left out: they read the host and do not
		// change resource names or counts.
		plugins, err := plugin.New(context.Background(), infolib, nvmllib, devicelib,
			plugin.WithConfig(config),
			plugin.WithDeviceListStrategies(deviceListStrategies),
			plugin.WithFailOnInitError(*config.Flags.FailOnInitError),
		)
		if err != nil {
			return fmt.Errorf("error getting plugins: unable to create plugins: %w", err)
		}
		// plugin.Interface does not expose its resource name, so names and devices come from the
		// resource managers plugin.New builds (same function, same input); the device counts
		// are cross-checked against the plugins.
		rms, err := rm.NewNVMLResourceManagers(infolib, nvmllib, devicelib, config)
		if err != nil {
			return err
		}
		total, served := 0, 0
		for _, r := range rms {
			// startPlugins only starts plugins that have devices: a resource without any is
			// never registered with the kubelet.
			if n := len(r.Devices()); n > 0 {
				res.Resources[string(r.Resource())] += n
				total += n
			}
		}
		for _, p := range plugins {
			served += len(p.Devices())
		}
		if served != total {
			return fmt.Errorf("internal: plugins serve %d devices, resource managers hold %d", served, total)
		}
		return nil
	})
	if err != nil {
		res.Errors[agentPlugin] = err.Error()
		res.Resources = map[string]int{}
	}
	return res, nil
}

// stubLibrary writes the NVML stub's config for req's GPUs and opens req.NVMLLibrary with go-nvml, as
// the device plugin opens libnvidia-ml.so.1.
func stubLibrary(req nodeRequest, dir string) (nvml.Interface, error) {
	raw, err := json.Marshal(map[string]any{
		"driverVersion": req.DriverVersion, "cudaDriverVersion": req.CudaDriverVersion, "gpus": req.GPUs})
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "nvml-stub.json")
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, err
	}
	if err := os.Setenv("GPUCLUSTER_NVML_STUB_CONFIG", path); err != nil {
		return nil, err
	}
	lib := nvml.New(nvml.WithLibraryPath(req.NVMLLibrary))
	// The library reads its config when its first user initialises it: this node's, from here on.
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, usageError{fmt.Sprintf("nvmlLibrary %s: nvmlInit: %v", req.NVMLLibrary, ret)}
	}
	if ret := lib.Shutdown(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("nvmlLibrary %s: nvmlShutdown: %v", req.NVMLLibrary, ret)
	}
	return lib, nil
}

// runPluginApp parses args with the device plugin's own cli.App (flags, defaults, environment
// variable names), then calls action instead of the plugin's daemon loop. Upstream's main() hands
// loadConfig the app's flag list (o.flags = c.Flags), which is what action receives.
func runPluginApp(args []string, action func(*cli.Context, []cli.Flag) error) error {
	app := upstreamPluginApp()
	app.Action = func(c *cli.Context) error { return action(c, app.Flags) }
	return runApp(app, "nvidia-device-plugin", args)
}

// runGFDApp does the same with GPU Feature Discovery's cli.App. Upstream's Config keeps the same
// flag list (c.Flags = config.flags); loadConfig reads nothing else from it.
func runGFDApp(args []string, action func(*cli.Context, *gfdConfig) error) error {
	app := upstreamGFDApp()
	cfg := &gfdConfig{flags: app.Flags}
	app.Action = func(c *cli.Context) error { return action(c, cfg) }
	return runApp(app, "gpu-feature-discovery", args)
}

func runApp(app *cli.App, name string, args []string) error {
	// Upstream flags also read environment variables (MIG_STRATEGY, CONFIG_FILE, ...): the
	// caller's environment must not leak into the simulated node.
	for _, f := range app.Flags {
		if ev, ok := f.(interface{ GetEnvVars() []string }); ok {
			for _, e := range ev.GetEnvVars() {
				os.Unsetenv(e)
			}
		}
	}
	app.Writer = os.Stderr
	app.ErrWriter = os.Stderr
	app.ExitErrHandler = func(*cli.Context, error) {}
	return app.Run(append([]string{name}, args...))
}

func newInfolib(nvmllib nvml.Interface, devicelib device.Interface) nvinfo.Interface {
	// The simulated node is a plain NVML node (not WSL, not Tegra); the platform resolution itself
	// is go-nvlib's and sees these properties.
	props := &nvinfo.PropertyExtractorMock{
		HasDXCoreFunc:          func() (bool, string) { return false, "simulated NVML node" },
		HasNvmlFunc:            func() (bool, string) { return true, "simulated NVML node" },
		HasTegraFilesFunc:      func() (bool, string) { return false, "simulated NVML node" },
		HasAnIntegratedGPUFunc: func() (bool, string) { return false, "simulated NVML node" },
	}
	return nvinfo.New(nvinfo.WithNvmlLib(nvmllib), nvinfo.WithDeviceLib(devicelib), nvinfo.WithPropertyExtractor(props))
}

func prefixAll(p string, xs []string) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, p+x)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
