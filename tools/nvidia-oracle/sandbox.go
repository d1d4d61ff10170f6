package main

// Two pieces of upstream code read fixed host paths instead of NVML:
//
//   - internal/rm (device plugin): a MIG device's paths come from
//     /proc/driver/nvidia-caps/mig-minors (internal/mig.GetMigCapabilityDevicePaths); without the
//     file every MIG device fails with "missing MIG GPU instance capability path".
//   - internal/resource (GFD): nvidia.com/gpu.mode is the PCI class read from
//     /sys/bus/pci/devices/<bus id>/class (go-nvlib nvpci, fixed root), and the vGPU labeler
//     scans /sys/bus/pci/devices.
//
// Rather than patching upstream, answering a node re-executes this binary in a new user + mount
// namespace (root may fall back to a mount namespace only) and bind-mounts directories generated
// from the request over /proc/driver and /sys/bus/pci/devices. Upstream code then runs unmodified
// and never sees the real host's devices. There is deliberately no unsandboxed fallback: it would
// publish wrong labels (gpu.mode unknown, no MIG resources) without saying so.

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle/mocknvml"
)

const (
	sandboxEnv         = "NVIDIA_ORACLE_SANDBOX"
	sandboxSetupFailed = 75 // the child could not set the sandbox up; the parent tries the next way

	hostProcDriver = "/proc/driver"
	hostPCIDevices = "/sys/bus/pci/devices"
	migMinorsFile  = "nvidia-caps/mig-minors"
)

// sandboxSetupError: the namespaces exist but the simulated paths could not be put in place.
type sandboxSetupError struct{ msg string }

func (e sandboxSetupError) Error() string { return e.msg }

// sandbox is the set-up private mount namespace: two staging folders bind-mounted over the
// host paths; populate rewrites their content for each answered node.
type sandbox struct {
	root, procDriver, pci string
}

// withSandbox runs fn inside the sandbox. Called in the parent it re-executes this binary (same
// arguments, same stdin) in new namespaces and returns the child's exit status; called in the child
// it sets the sandbox up first.
func withSandbox(input []byte, fn func(*sandbox) error) error {
	if os.Getenv(sandboxEnv) == "" {
		return reexecInSandbox(input)
	}
	sb, err := enterSandbox()
	if err != nil {
		return sandboxSetupError{err.Error()}
	}
	defer sb.close()
	return fn(sb)
}

type nsAttempt struct {
	name string
	attr *syscall.SysProcAttr
}

func reexecInSandbox(input []byte) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("sandbox: cannot find this executable to re-run it: %v", err)
	}
	attempts := []nsAttempt{{"user+mount namespace", &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}}}
	if os.Geteuid() == 0 { // root where user namespaces are off (some containers): mount namespace only
		attempts = append(attempts, nsAttempt{"mount namespace (root)", &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}})
	}
	var failures []string
	for _, a := range attempts {
		cmd := exec.Command(self, os.Args[1:]...)
		cmd.Stdin = bytes.NewReader(input)
		cmd.Stdout = os.Stdout
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Env = append(os.Environ(), sandboxEnv+"="+a.name)
		cmd.SysProcAttr = a.attr
		if err := cmd.Start(); err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", a.name, err))
			continue
		}
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == sandboxSetupFailed {
			failures = append(failures, fmt.Sprintf("%s: %s", a.name, strings.TrimSpace(stderr.String())))
			continue
		}
		_, _ = os.Stderr.Write(stderr.Bytes())
		switch {
		case err == nil:
			return nil
		case errors.As(err, &ee):
			return exitCode(ee.ExitCode())
		default:
			return err
		}
	}
	return fmt.Errorf("cannot give upstream code a simulated %s and %s (a private mount namespace is needed; "+
		"without it the answers would be wrong): %s. Allow unprivileged user namespaces "+
		"(sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone=1, "+
		"kernel.apparmor_restrict_unprivileged_userns=0) or run as root",
		filepath.Join(hostProcDriver, migMinorsFile), hostPCIDevices, strings.Join(failures, "; "))
}

// enterSandbox (in the child) makes mounts private and bind-mounts the staging folders.
func enterSandbox() (*sandbox, error) {
	// Keep mount events out of the parent namespace.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("making / private in the new mount namespace: %v", err)
	}
	for _, target := range []string{hostProcDriver, hostPCIDevices} {
		if st, err := os.Stat(target); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("mount target %s is not a directory on this host (%v)", target, err)
		}
	}
	root, err := os.MkdirTemp("", "nvidia-oracle-sandbox-")
	if err != nil {
		return nil, err
	}
	sb := &sandbox{root: root, procDriver: filepath.Join(root, "proc-driver"), pci: filepath.Join(root, "pci-devices")}
	for _, m := range [][2]string{{sb.procDriver, hostProcDriver}, {sb.pci, hostPCIDevices}} {
		if err := os.Mkdir(m[0], 0o755); err != nil {
			sb.close()
			return nil, err
		}
		if err := syscall.Mount(m[0], m[1], "", syscall.MS_BIND, ""); err != nil {
			sb.close()
			return nil, fmt.Errorf("bind-mounting a simulated %s: %v", m[1], err)
		}
	}
	return sb, nil
}

func (sb *sandbox) close() { _ = os.RemoveAll(sb.root) }

// populate replaces the simulated /proc/driver and /sys/bus/pci/devices with the node's devices,
// then reads them back through the mounted paths, so a mount that did not take effect is an error
// rather than upstream silently reading the host.
func (sb *sandbox) populate(gpus []*mocknvml.GPU) error {
	if sb == nil {
		return errors.New("internal: a node must be answered inside the sandbox")
	}
	for _, dir := range []string{sb.procDriver, sb.pci} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}

	// /proc/driver/nvidia-caps/mig-minors in the driver's format.
	var minors bytes.Buffer
	fmt.Fprintf(&minors, "config 1\nmonitor 2\n")
	next := 3
	for _, g := range gpus {
		for j := range g.MigDevices {
			gi := j + 1 // GPU instance ids as the mock assigns them
			fmt.Fprintf(&minors, "gpu%d/gi%d/access %d\n", g.Index(), gi, next)
			fmt.Fprintf(&minors, "gpu%d/gi%d/ci0/access %d\n", g.Index(), gi, next+1)
			next += 2
		}
	}
	if err := writeFile(filepath.Join(sb.procDriver, migMinorsFile), minors.Bytes()); err != nil {
		return err
	}

	// /sys/bus/pci/devices/<bus id>/{vendor,device,class,numa_node,resource,config}
	var busIDs []string
	for _, g := range gpus {
		busIDs = append(busIDs, g.BusID())
		numa := g.NUMANode
		if numa == 0 {
			numa = -1
		}
		config := make([]byte, 256) // vendor/device ids and no capability list (so: not a vGPU)
		config[0], config[1] = 0xde, 0x10
		config[2], config[3] = byte(g.DeviceID()), byte(g.DeviceID()>>8)
		files := map[string]string{
			"vendor":    "0x10de\n",
			"device":    fmt.Sprintf("0x%04x\n", g.DeviceID()),
			"class":     fmt.Sprintf("0x%06x\n", g.ClassCode()),
			"numa_node": fmt.Sprintf("%d\n", numa),
			"resource":  "0x0000000000000000 0x0000000000000000 0x0000000000000000\n",
			"config":    string(config),
		}
		for name, content := range files {
			if err := writeFile(filepath.Join(sb.pci, g.BusID(), name), []byte(content)); err != nil {
				return err
			}
		}
	}

	got, err := os.ReadFile(filepath.Join(hostProcDriver, migMinorsFile))
	if err != nil || !bytes.Equal(got, minors.Bytes()) {
		return fmt.Errorf("sandbox: %s does not show the simulated content (%v)", filepath.Join(hostProcDriver, migMinorsFile), err)
	}
	entries, err := os.ReadDir(hostPCIDevices)
	if err != nil {
		return fmt.Errorf("sandbox: reading %s: %v", hostPCIDevices, err)
	}
	var seen []string
	for _, e := range entries {
		seen = append(seen, e.Name())
	}
	sort.Strings(busIDs)
	if strings.Join(seen, ",") != strings.Join(busIDs, ",") {
		return fmt.Errorf("sandbox: %s shows %v, not the simulated devices %v", hostPCIDevices, seen, busIDs)
	}
	return nil
}

func writeFile(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, content, 0o644)
}
