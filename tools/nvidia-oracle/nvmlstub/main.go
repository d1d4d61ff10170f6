// Command nvmlstub is built with -buildmode=c-shared as libnvidia-ml.so.1: an NVML library for hosts
// without a GPU, so that NVIDIA's own binaries (the device plugin of k8s-device-plugin) run
// unmodified on them, as NVIDIA's CI runs its components over a mock NVML. It is gpucluster's CI
// stand-in for silicon, never a driver: every GPU it reports is SIMULATED, and it says so on stderr
// when it is initialised.
//
// What it reports is the mock of ../mocknvml (the one nvidia-oracle hands upstream code), built from a
// JSON file named by $GPUCLUSTER_NVML_STUB_CONFIG (default /etc/gpucluster/nvml-stub.json), read
// when the first user initialises NVML:
//
//	{"driverVersion": "580.95.05", "cudaDriverVersion": 13000,
//	 "gpus": [{"productName": "NVIDIA L40S", "memoryMiB": 46068, "computeMajor": 8, ...}],
//	 "eventsFile": "/run/gpucluster-nvml-stub/events"}
//
// "gpus" is nvidia-oracle's GPU request format. Each C function below has the signature nvml.h
// declares and fills the same structs go-nvml's types mirror (pkg/nvml/types_gen.go, generated from
// nvml.h by cgo -godefs, so their layouts are the C ones); structs that hold handles are mirrored here.
// Handles are small C allocations that stand for mock objects, stable for the life of the process.
//
// Health events: a line {"uuid": "GPU-...", "xid": 79} appended to eventsFile is delivered by
// nvmlEventSetWait to every event set created before it that registered that GPU for XID events:
// the fault injection the device plugin's health check reacts to (it marks the GPU unhealthy).
//
// Only what NVIDIA's node agents call is exported. A function the mock does not model returns
// NVML_ERROR_NOT_SUPPORTED and names itself on stderr; one not exported at all fails the caller with
// the dynamic linker's "undefined symbol" (go-nvml binds lazily), which names it too.
package main

// #include <stdlib.h>
import "C"

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/NVIDIA/k8s-device-plugin/gpucluster-oracle/mocknvml"
)

const (
	configEnv     = "GPUCLUSTER_NVML_STUB_CONFIG"
	defaultConfig = "/etc/gpucluster/nvml-stub.json"
	prefix        = "gpucluster NVML stub"
)

type config struct {
	DriverVersion     string                `json:"driverVersion"`
	CudaDriverVersion int                   `json:"cudaDriverVersion"`
	GPUs              []mocknvml.GPURequest `json:"gpus"`
	EventsFile        string                `json:"eventsFile,omitempty"`
}

var (
	mu       sync.Mutex
	srv      *mocknvml.Server
	cfg      config
	loaded   []byte // the config srv was built from
	refcount int
	byHandle = map[unsafe.Pointer]any{}
	byObject = map[any]unsafe.Pointer{}
	messages = map[nvml.Return]*C.char{}
)

func main() {}

// configPath is read from the C environment on every first Init: a Go library keeps its own copy
// of the environment from load time, and a caller may name the file after loading the library.
func configPath() string {
	name := C.CString(configEnv)
	defer C.free(unsafe.Pointer(name))
	if v := C.getenv(name); v != nil && C.GoString(v) != "" {
		return C.GoString(v)
	}
	return defaultConfig
}

// load (re)builds the mock from the config when the first user initialises NVML. The same content
// keeps the same mock, so handles stay valid across Shutdown and Init as NVML's do; new content
// (another simulated node, in nvidia-oracle's library mode) builds new GPUs.
func load() error {
	path := configPath()
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("%v (set %s to the stub's config file)", err, configEnv)
	}
	if srv != nil && bytes.Equal(raw, loaded) {
		return nil
	}
	var next config
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&next); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	if next.DriverVersion == "" || next.CudaDriverVersion == 0 {
		return fmt.Errorf("%s: driverVersion and cudaDriverVersion are required", path)
	}
	gpus, err := mocknvml.ExpandGPUs(next.GPUs)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	s := mocknvml.NewServer(gpus, next.DriverVersion, next.CudaDriverVersion)
	if err := s.CheckProfileNames(); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	srv, cfg, loaded = s, next, raw
	var names []string
	for _, g := range gpus {
		names = append(names, fmt.Sprintf("%d: %s %s", g.Index(), g.ProductName, g.ID()))
	}
	fmt.Fprintf(os.Stderr, "%s: %d SIMULATED GPU(s) from %s, no real GPU (driver %s): %s\n",
		prefix, len(gpus), path, next.DriverVersion, strings.Join(names, "; "))
	return nil
}

// handleOf is the C handle standing for a mock object (allocated on first use).
func handleOf(obj any) unsafe.Pointer {
	if h, ok := byObject[obj]; ok {
		return h
	}
	h := C.malloc(1)
	byObject[obj] = h
	byHandle[h] = obj
	return h
}

func code(r nvml.Return) C.int { return C.int(r) }

// call runs one NVML entry point: initialised, serialised, and a mock gap reported instead of a crash.
func call(name string, fn func() nvml.Return) (ret C.int) {
	mu.Lock()
	defer mu.Unlock()
	if refcount == 0 || srv == nil {
		return code(nvml.ERROR_UNINITIALIZED)
	}
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(os.Stderr, "%s: %s is not modelled (%v): NOT_SUPPORTED\n", prefix, name, r)
			ret = code(nvml.ERROR_NOT_SUPPORTED)
		}
	}()
	return code(fn())
}

func device(h unsafe.Pointer) (nvml.Device, nvml.Return) {
	if d, ok := byHandle[h].(nvml.Device); ok {
		return d, nvml.SUCCESS
	}
	return nil, nvml.ERROR_INVALID_ARGUMENT
}

func gpuInstance(h unsafe.Pointer) (nvml.GpuInstance, nvml.Return) {
	if gi, ok := byHandle[h].(nvml.GpuInstance); ok {
		return gi, nvml.SUCCESS
	}
	return nil, nvml.ERROR_INVALID_ARGUMENT
}

func computeInstance(h unsafe.Pointer) (nvml.ComputeInstance, nvml.Return) {
	if ci, ok := byHandle[h].(nvml.ComputeInstance); ok {
		return ci, nvml.SUCCESS
	}
	return nil, nvml.ERROR_INVALID_ARGUMENT
}

// onDevice runs fn on the mock device behind handle h.
func onDevice(name string, h unsafe.Pointer, fn func(nvml.Device) nvml.Return) C.int {
	return call(name, func() nvml.Return {
		d, ret := device(h)
		if ret != nvml.SUCCESS {
			return ret
		}
		return fn(d)
	})
}

// putString copies s into the caller's buffer of length n, as NVML does (NUL-terminated).
func putString(buf *C.char, n C.uint, s string, ret nvml.Return) nvml.Return {
	if ret != nvml.SUCCESS {
		return ret
	}
	if buf == nil {
		return nvml.ERROR_INVALID_ARGUMENT
	}
	if uint64(len(s))+1 > uint64(n) {
		return nvml.ERROR_INSUFFICIENT_SIZE
	}
	out := unsafe.Slice((*byte)(unsafe.Pointer(buf)), int(n))
	copy(out, s)
	out[len(s)] = 0
	return nvml.SUCCESS
}

func putUint(p *C.uint, v int, ret nvml.Return) nvml.Return {
	if ret == nvml.SUCCESS {
		if p == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		*p = C.uint(v)
	}
	return ret
}

func putHandle(p *unsafe.Pointer, obj any, ret nvml.Return) nvml.Return {
	if ret == nvml.SUCCESS {
		if p == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		*p = handleOf(obj)
	}
	return ret
}

// ---- initialisation and system ---------------------------------------------------------------

//export nvmlInit_v2
func nvmlInit_v2() C.int { return nvmlInitWithFlags(0) }

//export nvmlInitWithFlags
func nvmlInitWithFlags(flags C.uint) C.int {
	mu.Lock()
	defer mu.Unlock()
	if refcount == 0 {
		if err := load(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: cannot initialise: %v\n", prefix, err)
			return code(nvml.ERROR_DRIVER_NOT_LOADED)
		}
	}
	refcount++
	return code(nvml.SUCCESS)
}

//export nvmlShutdown
func nvmlShutdown() C.int {
	mu.Lock()
	defer mu.Unlock()
	if refcount == 0 {
		return code(nvml.ERROR_UNINITIALIZED)
	}
	refcount--
	return code(nvml.SUCCESS)
}

//export nvmlErrorString
func nvmlErrorString(r C.int) *C.char {
	mu.Lock()
	defer mu.Unlock()
	ret := nvml.Return(r)
	if s, ok := messages[ret]; ok {
		return s
	}
	s := C.CString(ret.Error()) // go-nvml's names for the codes (this library loads no other NVML)
	messages[ret] = s
	return s
}

//export nvmlSystemGetDriverVersion
func nvmlSystemGetDriverVersion(buf *C.char, n C.uint) C.int {
	return call("nvmlSystemGetDriverVersion", func() nvml.Return {
		v, ret := srv.SystemGetDriverVersion()
		return putString(buf, n, v, ret)
	})
}

//export nvmlSystemGetNVMLVersion
func nvmlSystemGetNVMLVersion(buf *C.char, n C.uint) C.int {
	return call("nvmlSystemGetNVMLVersion", func() nvml.Return {
		v, ret := srv.SystemGetNVMLVersion()
		return putString(buf, n, v, ret)
	})
}

//export nvmlSystemGetCudaDriverVersion
func nvmlSystemGetCudaDriverVersion(v *C.int) C.int {
	return call("nvmlSystemGetCudaDriverVersion", func() nvml.Return {
		n, ret := srv.SystemGetCudaDriverVersion()
		if ret == nvml.SUCCESS {
			*v = C.int(n)
		}
		return ret
	})
}

//export nvmlSystemGetCudaDriverVersion_v2
func nvmlSystemGetCudaDriverVersion_v2(v *C.int) C.int { return nvmlSystemGetCudaDriverVersion(v) }

// ---- devices ------------------------------------------------------------------------------------

//export nvmlDeviceGetCount_v2
func nvmlDeviceGetCount_v2(n *C.uint) C.int {
	return call("nvmlDeviceGetCount_v2", func() nvml.Return {
		count, ret := srv.DeviceGetCount()
		return putUint(n, count, ret)
	})
}

//export nvmlDeviceGetHandleByIndex_v2
func nvmlDeviceGetHandleByIndex_v2(i C.uint, out *unsafe.Pointer) C.int {
	return call("nvmlDeviceGetHandleByIndex_v2", func() nvml.Return {
		d, ret := srv.DeviceGetHandleByIndex(int(i))
		return putHandle(out, d, ret)
	})
}

//export nvmlDeviceGetHandleByUUID
func nvmlDeviceGetHandleByUUID(id *C.char, out *unsafe.Pointer) C.int {
	return call("nvmlDeviceGetHandleByUUID", func() nvml.Return {
		if id == nil {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		d, ret := srv.DeviceGetHandleByUUID(C.GoString(id))
		return putHandle(out, d, ret)
	})
}

//export nvmlDeviceGetName
func nvmlDeviceGetName(h unsafe.Pointer, buf *C.char, n C.uint) C.int {
	return onDevice("nvmlDeviceGetName", h, func(d nvml.Device) nvml.Return {
		v, ret := d.GetName()
		return putString(buf, n, v, ret)
	})
}

//export nvmlDeviceGetUUID
func nvmlDeviceGetUUID(h unsafe.Pointer, buf *C.char, n C.uint) C.int {
	return onDevice("nvmlDeviceGetUUID", h, func(d nvml.Device) nvml.Return {
		v, ret := d.GetUUID()
		return putString(buf, n, v, ret)
	})
}

//export nvmlDeviceGetIndex
func nvmlDeviceGetIndex(h unsafe.Pointer, v *C.uint) C.int {
	return onDevice("nvmlDeviceGetIndex", h, func(d nvml.Device) nvml.Return {
		i, ret := d.GetIndex()
		return putUint(v, i, ret)
	})
}

//export nvmlDeviceGetMinorNumber
func nvmlDeviceGetMinorNumber(h unsafe.Pointer, v *C.uint) C.int {
	return onDevice("nvmlDeviceGetMinorNumber", h, func(d nvml.Device) nvml.Return {
		i, ret := d.GetMinorNumber()
		return putUint(v, i, ret)
	})
}

//export nvmlDeviceGetBrand
func nvmlDeviceGetBrand(h unsafe.Pointer, v *C.int) C.int {
	return onDevice("nvmlDeviceGetBrand", h, func(d nvml.Device) nvml.Return {
		b, ret := d.GetBrand()
		if ret == nvml.SUCCESS {
			*v = C.int(b)
		}
		return ret
	})
}

//export nvmlDeviceGetArchitecture
func nvmlDeviceGetArchitecture(h unsafe.Pointer, v *C.uint) C.int {
	return onDevice("nvmlDeviceGetArchitecture", h, func(d nvml.Device) nvml.Return {
		a, ret := d.GetArchitecture()
		return putUint(v, int(a), ret)
	})
}

//export nvmlDeviceGetCudaComputeCapability
func nvmlDeviceGetCudaComputeCapability(h unsafe.Pointer, major, minor *C.int) C.int {
	return onDevice("nvmlDeviceGetCudaComputeCapability", h, func(d nvml.Device) nvml.Return {
		a, b, ret := d.GetCudaComputeCapability()
		if ret == nvml.SUCCESS {
			*major, *minor = C.int(a), C.int(b)
		}
		return ret
	})
}

//export nvmlDeviceGetMemoryInfo
func nvmlDeviceGetMemoryInfo(h unsafe.Pointer, out unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetMemoryInfo", h, func(d nvml.Device) nvml.Return {
		m, ret := d.GetMemoryInfo()
		if ret == nvml.SUCCESS {
			*(*nvml.Memory)(out) = m
		}
		return ret
	})
}

//export nvmlDeviceGetPciInfo_v3
func nvmlDeviceGetPciInfo_v3(h unsafe.Pointer, out unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetPciInfo_v3", h, func(d nvml.Device) nvml.Return {
		p, ret := d.GetPciInfo()
		if ret == nvml.SUCCESS {
			*(*nvml.PciInfo)(out) = p
		}
		return ret
	})
}

//export nvmlDeviceGetGpuFabricInfo
func nvmlDeviceGetGpuFabricInfo(h unsafe.Pointer, out unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetGpuFabricInfo", h, func(d nvml.Device) nvml.Return {
		f, ret := d.GetGpuFabricInfo()
		if ret == nvml.SUCCESS {
			*(*nvml.GpuFabricInfo)(out) = f
		}
		return ret
	})
}

//export nvmlDeviceGetAddressingMode
func nvmlDeviceGetAddressingMode(h unsafe.Pointer, out unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetAddressingMode", h, func(d nvml.Device) nvml.Return {
		m, ret := d.GetAddressingMode()
		if ret == nvml.SUCCESS {
			*(*nvml.DeviceAddressingMode)(out) = m
		}
		return ret
	})
}

//export nvmlDeviceGetTopologyCommonAncestor
func nvmlDeviceGetTopologyCommonAncestor(h1, h2 unsafe.Pointer, out *C.int) C.int {
	return onDevice("nvmlDeviceGetTopologyCommonAncestor", h1, func(d nvml.Device) nvml.Return {
		other, ret := device(h2)
		if ret != nvml.SUCCESS {
			return ret
		}
		level, ret := d.GetTopologyCommonAncestor(other)
		if ret == nvml.SUCCESS {
			*out = C.int(level)
		}
		return ret
	})
}

//export nvmlDeviceGetNvLinkState
func nvmlDeviceGetNvLinkState(h unsafe.Pointer, link C.uint, out *C.int) C.int {
	return onDevice("nvmlDeviceGetNvLinkState", h, func(d nvml.Device) nvml.Return {
		s, ret := d.GetNvLinkState(int(link))
		if ret == nvml.SUCCESS {
			*out = C.int(s)
		}
		return ret
	})
}

//export nvmlDeviceGetNvLinkRemotePciInfo_v2
func nvmlDeviceGetNvLinkRemotePciInfo_v2(h unsafe.Pointer, link C.uint, out unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetNvLinkRemotePciInfo_v2", h, func(d nvml.Device) nvml.Return {
		p, ret := d.GetNvLinkRemotePciInfo(int(link))
		if ret == nvml.SUCCESS {
			*(*nvml.PciInfo)(out) = p
		}
		return ret
	})
}

// ---- MIG ---------------------------------------------------------------------------------------

// gpuInstanceInfo mirrors nvmlGpuInstanceInfo_t (a device handle, then ids and the placement).
type gpuInstanceInfo struct {
	Device    unsafe.Pointer
	Id        uint32
	ProfileId uint32
	Placement nvml.GpuInstancePlacement
}

// computeInstanceInfo mirrors nvmlComputeInstanceInfo_t.
type computeInstanceInfo struct {
	Device      unsafe.Pointer
	GpuInstance unsafe.Pointer
	Id          uint32
	ProfileId   uint32
	Placement   nvml.ComputeInstancePlacement
}

func boolFlag(b bool) int {
	if b {
		return 1
	}
	return 0
}

//export nvmlDeviceIsMigDeviceHandle
func nvmlDeviceIsMigDeviceHandle(h unsafe.Pointer, v *C.uint) C.int {
	return onDevice("nvmlDeviceIsMigDeviceHandle", h, func(d nvml.Device) nvml.Return {
		is, ret := d.IsMigDeviceHandle()
		return putUint(v, boolFlag(is), ret)
	})
}

//export nvmlDeviceGetMigMode
func nvmlDeviceGetMigMode(h unsafe.Pointer, current, pending *C.uint) C.int {
	return onDevice("nvmlDeviceGetMigMode", h, func(d nvml.Device) nvml.Return {
		c, p, ret := d.GetMigMode()
		if ret == nvml.SUCCESS {
			*current, *pending = C.uint(c), C.uint(p)
		}
		return ret
	})
}

//export nvmlDeviceGetMaxMigDeviceCount
func nvmlDeviceGetMaxMigDeviceCount(h unsafe.Pointer, v *C.uint) C.int {
	return onDevice("nvmlDeviceGetMaxMigDeviceCount", h, func(d nvml.Device) nvml.Return {
		n, ret := d.GetMaxMigDeviceCount()
		return putUint(v, n, ret)
	})
}

//export nvmlDeviceGetMigDeviceHandleByIndex
func nvmlDeviceGetMigDeviceHandleByIndex(h unsafe.Pointer, i C.uint, out *unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetMigDeviceHandleByIndex", h, func(d nvml.Device) nvml.Return {
		m, ret := d.GetMigDeviceHandleByIndex(int(i))
		return putHandle(out, m, ret)
	})
}

//export nvmlDeviceGetDeviceHandleFromMigDeviceHandle
func nvmlDeviceGetDeviceHandleFromMigDeviceHandle(h unsafe.Pointer, out *unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", h, func(d nvml.Device) nvml.Return {
		p, ret := d.GetDeviceHandleFromMigDeviceHandle()
		return putHandle(out, p, ret)
	})
}

//export nvmlDeviceGetGpuInstanceId
func nvmlDeviceGetGpuInstanceId(h unsafe.Pointer, v *C.uint) C.int {
	return onDevice("nvmlDeviceGetGpuInstanceId", h, func(d nvml.Device) nvml.Return {
		id, ret := d.GetGpuInstanceId()
		return putUint(v, id, ret)
	})
}

//export nvmlDeviceGetComputeInstanceId
func nvmlDeviceGetComputeInstanceId(h unsafe.Pointer, v *C.uint) C.int {
	return onDevice("nvmlDeviceGetComputeInstanceId", h, func(d nvml.Device) nvml.Return {
		id, ret := d.GetComputeInstanceId()
		return putUint(v, id, ret)
	})
}

//export nvmlDeviceGetAttributes_v2
func nvmlDeviceGetAttributes_v2(h unsafe.Pointer, out unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetAttributes_v2", h, func(d nvml.Device) nvml.Return {
		a, ret := d.GetAttributes()
		if ret == nvml.SUCCESS {
			*(*nvml.DeviceAttributes)(out) = a
		}
		return ret
	})
}

//export nvmlDeviceGetGpuInstanceProfileInfo
func nvmlDeviceGetGpuInstanceProfileInfo(h unsafe.Pointer, profile C.uint, out unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetGpuInstanceProfileInfo", h, func(d nvml.Device) nvml.Return {
		info, ret := d.GetGpuInstanceProfileInfo(int(profile))
		if ret == nvml.SUCCESS {
			*(*nvml.GpuInstanceProfileInfo)(out) = info
		}
		return ret
	})
}

//export nvmlDeviceGetGpuInstanceById
func nvmlDeviceGetGpuInstanceById(h unsafe.Pointer, id C.uint, out *unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceGetGpuInstanceById", h, func(d nvml.Device) nvml.Return {
		gi, ret := d.GetGpuInstanceById(int(id))
		return putHandle(out, gi, ret)
	})
}

//export nvmlGpuInstanceGetInfo
func nvmlGpuInstanceGetInfo(h unsafe.Pointer, out unsafe.Pointer) C.int {
	return call("nvmlGpuInstanceGetInfo", func() nvml.Return {
		gi, ret := gpuInstance(h)
		if ret != nvml.SUCCESS {
			return ret
		}
		info, ret := gi.GetInfo()
		if ret == nvml.SUCCESS {
			*(*gpuInstanceInfo)(out) = gpuInstanceInfo{Device: handleOf(info.Device), Id: info.Id,
				ProfileId: info.ProfileId, Placement: info.Placement}
		}
		return ret
	})
}

//export nvmlGpuInstanceGetComputeInstanceById
func nvmlGpuInstanceGetComputeInstanceById(h unsafe.Pointer, id C.uint, out *unsafe.Pointer) C.int {
	return call("nvmlGpuInstanceGetComputeInstanceById", func() nvml.Return {
		gi, ret := gpuInstance(h)
		if ret != nvml.SUCCESS {
			return ret
		}
		ci, ret := gi.GetComputeInstanceById(int(id))
		return putHandle(out, ci, ret)
	})
}

//export nvmlGpuInstanceGetComputeInstanceProfileInfo
func nvmlGpuInstanceGetComputeInstanceProfileInfo(h unsafe.Pointer, profile, engine C.uint, out unsafe.Pointer) C.int {
	return call("nvmlGpuInstanceGetComputeInstanceProfileInfo", func() nvml.Return {
		gi, ret := gpuInstance(h)
		if ret != nvml.SUCCESS {
			return ret
		}
		info, ret := gi.GetComputeInstanceProfileInfo(int(profile), int(engine))
		if ret == nvml.SUCCESS {
			*(*nvml.ComputeInstanceProfileInfo)(out) = info
		}
		return ret
	})
}

//export nvmlComputeInstanceGetInfo_v2
func nvmlComputeInstanceGetInfo_v2(h unsafe.Pointer, out unsafe.Pointer) C.int {
	return call("nvmlComputeInstanceGetInfo_v2", func() nvml.Return {
		ci, ret := computeInstance(h)
		if ret != nvml.SUCCESS {
			return ret
		}
		info, ret := ci.GetInfo()
		if ret == nvml.SUCCESS {
			*(*computeInstanceInfo)(out) = computeInstanceInfo{Device: handleOf(info.Device),
				GpuInstance: handleOf(info.GpuInstance), Id: info.Id, ProfileId: info.ProfileId, Placement: info.Placement}
		}
		return ret
	})
}
