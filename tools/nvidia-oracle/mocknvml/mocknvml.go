// Package mocknvml is a mock NVML built from a request, on go-nvml's generated mocks (pkg/nvml/mock:
// structs of function fields), the way pkg/nvml/mock/dgxa100 builds its DGX A100 - but
// parametrised, so any model (H100, L4, L40S, A100, ...) with or without MIG can be described.
// nvidia-oracle hands it to upstream code as its nvml.Interface; the NVML stub library (../nvmlstub)
// serves the same mock through NVML's C ABI to unmodified NVIDIA binaries.
//
// Only facts NVML reports are modelled; everything derived from them (MIG profile names,
// label values, resource names and counts) is computed by upstream code (go-nvlib,
// k8s-device-plugin). An NVML call the mock does not implement panics in the generated mock
// ("...Func: method is nil but ... was just called"); nvidia-oracle turns that into an error.
// Not modelled: NVLink links (every link reports NOT_SUPPORTED, so GPUs look PCIe-only; a GPU may still
// report multi-node NVLink fabric info, GetGpuFabricInfo, as a GB200 NVL72 does) and PCIe switches
// (two GPUs share at most a NUMA node).
package mocknvml

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/uuid"
)

const mib = 1024 * 1024

// GPURequest describes one GPU model as NVML reports it (or `count` identical GPUs).
type GPURequest struct {
	ProductName  string `json:"productName"`           // nvmlDeviceGetName
	MemoryMiB    uint64 `json:"memoryMiB"`             // nvmlDeviceGetMemoryInfo total / MiB
	ComputeMajor int    `json:"computeMajor"`          // nvmlDeviceGetCudaComputeCapability
	ComputeMinor int    `json:"computeMinor"`          //
	Arch         string `json:"arch,omitempty"`        // nvmlDeviceGetArchitecture: ampere, hopper, ada, blackwell, ...
	Count        int    `json:"count,omitempty"`       // this many identical GPUs (default 1)
	UUID         string `json:"uuid,omitempty"`        // default: deterministic per index (count must be 1 to set it)
	PCIBusID     string `json:"pciBusId,omitempty"`    // default: 0000:<0x18+0x10*i>:00.0 (count must be 1 to set it)
	PCIDeviceID  string `json:"pciDeviceId,omitempty"` // e.g. "0x2330"; sysfs 'device' and NVML pciDeviceId
	PCIClass     string `json:"pciClass,omitempty"`    // sysfs 'class'; default "0x030200" (3D controller -> gpu.mode=compute)
	NUMANode     int    `json:"numaNode,omitempty"`    // sysfs 'numa_node'; default -1 (none)
	// MigCapable: NVML reports a MIG mode (implied by migProfiles). A MIG-capable GPU may leave
	// migProfiles out while MIG is disabled; the profiles then report NOT_SUPPORTED.
	MigCapable  bool                `json:"migCapable,omitempty"`
	MigProfiles []MigProfileRequest `json:"migProfiles,omitempty"` // GPU-instance profiles NVML reports
	MigEnabled  bool                `json:"migEnabled,omitempty"`  // MIG mode (current)
	MigDevices  []string            `json:"migDevices,omitempty"`  // MIG devices configured, by profile name
	// Fabric: the GPU's NVLink fabric (nvmlDeviceGetGpuFabricInfo); nil: NOT_SUPPORTED (no fabric).
	Fabric *FabricRequest `json:"fabric,omitempty"`
}

// FabricRequest is a GPU's NVLink fabric registration as nvmlDeviceGetGpuFabricInfo reports it
// (multi-node NVLink: GPUs in one clique of one cluster share an NVLink domain).
type FabricRequest struct {
	ClusterUUID string `json:"clusterUuid"` // e.g. 00000001-0000-0000-0000-000000000001
	CliqueID    uint32 `json:"cliqueId"`
	State       string `json:"state,omitempty"` // completed (default), in-progress, not-started, not-supported
}

var fabricStates = map[string]uint8{ // nvmlGpuFabricState_t
	"": nvml.GPU_FABRIC_STATE_COMPLETED, "completed": nvml.GPU_FABRIC_STATE_COMPLETED,
	"in-progress": nvml.GPU_FABRIC_STATE_IN_PROGRESS, "not-started": nvml.GPU_FABRIC_STATE_NOT_STARTED,
	"not-supported": nvml.GPU_FABRIC_STATE_NOT_SUPPORTED,
}

// info is what nvmlDeviceGetGpuFabricInfo answers for f, or why f is not a valid request.
func (f *FabricRequest) info() (nvml.GpuFabricInfo, error) {
	id, err := uuid.Parse(f.ClusterUUID)
	if err != nil {
		return nvml.GpuFabricInfo{}, fmt.Errorf("clusterUuid %q: %v", f.ClusterUUID, err)
	}
	state, ok := fabricStates[f.State]
	if !ok {
		return nvml.GpuFabricInfo{}, fmt.Errorf("state %q: not one of completed, in-progress, not-started, not-supported", f.State)
	}
	return nvml.GpuFabricInfo{ClusterUuid: id, CliqueId: f.CliqueID, State: state, Status: uint32(nvml.SUCCESS)}, nil
}

// MigProfileRequest is one GPU-instance profile as nvmlDeviceGetGpuInstanceProfileInfo reports it.
type MigProfileRequest struct {
	Name            string `json:"name"`                  // NVIDIA's name, e.g. 1g.5gb, 1g.10gb, 1g.5gb+me; checked against go-nvlib's derivation
	GIProfileID     *int   `json:"giProfileId,omitempty"` // NVML_GPU_INSTANCE_PROFILE_*; default: derived from the name
	MemoryMiB       uint64 `json:"memoryMiB"`             // MemorySizeMB (e.g. 4864 for A100-40GB 1g.5gb)
	InstanceCount   uint32 `json:"instanceCount"`         // most instances per GPU
	Multiprocessors uint32 `json:"multiprocessors,omitempty"`
	CopyEngines     uint32 `json:"copyEngines,omitempty"`
	Decoders        uint32 `json:"decoders,omitempty"`
	Encoders        uint32 `json:"encoders,omitempty"`
	Jpegs           uint32 `json:"jpegs,omitempty"`
	Ofas            uint32 `json:"ofas,omitempty"`
}

type GPU struct {
	GPURequest
	index      int
	uuid       string
	busID      string // sysfs form: 0000:18:00.0
	deviceID   uint32
	class      uint32
	profiles   map[int]profileSpec // by GI profile id
	migCapable bool
	fabric     *nvml.GpuFabricInfo // nil: no fabric (NOT_SUPPORTED)
}

// Index is the GPU's NVML index (and minor number).
func (g *GPU) Index() int { return g.index }

// ID is the GPU's UUID as NVML reports it (GPU-...).
func (g *GPU) ID() string { return g.uuid }

// BusID is the GPU's PCI address in sysfs form (0000:18:00.0).
func (g *GPU) BusID() string { return g.busID }

// DeviceID is the PCI device id (sysfs 'device').
func (g *GPU) DeviceID() uint32 { return g.deviceID }

// ClassCode is the PCI class (sysfs 'class').
func (g *GPU) ClassCode() uint32 { return g.class }

type profileSpec struct {
	MigProfileRequest
	giProfileID int
	slices      int
}

func ExpandGPUs(reqs []GPURequest) ([]*GPU, error) {
	var out []*GPU
	for ri, r := range reqs {
		n := r.Count
		if n == 0 {
			n = 1
		}
		if n > 1 && (r.UUID != "" || r.PCIBusID != "") {
			return nil, fmt.Errorf("gpus[%d]: uuid/pciBusId need count 1", ri)
		}
		if r.ProductName == "" || r.MemoryMiB == 0 {
			return nil, fmt.Errorf("gpus[%d]: productName and memoryMiB are required", ri)
		}
		profiles, err := resolveProfiles(r.MigProfiles)
		if err != nil {
			return nil, fmt.Errorf("gpus[%d]: %v", ri, err)
		}
		if r.MigEnabled && len(profiles) == 0 {
			return nil, fmt.Errorf("gpus[%d]: migEnabled needs migProfiles (the profiles NVML reports)", ri)
		}
		if len(r.MigDevices) > 0 && !r.MigEnabled {
			return nil, fmt.Errorf("gpus[%d]: migDevices need migEnabled", ri)
		}
		used := map[string]uint32{}
		for _, name := range r.MigDevices {
			p, ok := profileByName(profiles, name)
			if !ok {
				return nil, fmt.Errorf("gpus[%d]: MIG device %q is not one of migProfiles", ri, name)
			}
			used[name]++
			if used[name] > p.InstanceCount {
				return nil, fmt.Errorf("gpus[%d]: more than %d %s instances per GPU", ri, p.InstanceCount, name)
			}
		}
		devID, err := parseUint32(r.PCIDeviceID, 0)
		if err != nil {
			return nil, fmt.Errorf("gpus[%d].pciDeviceId: %v", ri, err)
		}
		class, err := parseUint32(r.PCIClass, 0x030200)
		if err != nil {
			return nil, fmt.Errorf("gpus[%d].pciClass: %v", ri, err)
		}
		var fabric *nvml.GpuFabricInfo
		if r.Fabric != nil {
			info, err := r.Fabric.info()
			if err != nil {
				return nil, fmt.Errorf("gpus[%d].fabric: %v", ri, err)
			}
			fabric = &info
		}
		for k := 0; k < n; k++ {
			i := len(out)
			g := &GPU{GPURequest: r, index: i, deviceID: devID, class: class, profiles: profiles,
				migCapable: r.MigCapable || len(profiles) > 0, fabric: fabric}
			g.uuid = r.UUID
			if g.uuid == "" {
				g.uuid = "GPU-" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("nvidia-oracle/gpu/%d", i))).String()
			}
			g.busID = strings.ToLower(r.PCIBusID)
			if g.busID == "" {
				g.busID = fmt.Sprintf("%04x:%02x:00.0", (0x18+0x10*i)/0x100, (0x18+0x10*i)%0x100)
			}
			out = append(out, g)
		}
	}
	seen := map[string]int{}
	for _, g := range out {
		for _, id := range []string{g.uuid, g.busID} {
			if prev, dup := seen[id]; dup {
				return nil, fmt.Errorf("GPUs %d and %d both have %s", prev, g.index, id)
			}
			seen[id] = g.index
		}
	}
	return out, nil
}

func parseUint32(s string, def uint32) (uint32, error) {
	if s == "" {
		return def, nil
	}
	v, err := strconv.ParseUint(s, 0, 32)
	return uint32(v), err
}

func profileByName(ps map[int]profileSpec, name string) (profileSpec, bool) {
	for _, p := range ps {
		if p.Name == name {
			return p, true
		}
	}
	return profileSpec{}, false
}

var profileName = regexp.MustCompile(`^([0-9]+)g\.([0-9]+)gb(?:([+-])(me|me\.all|gfx))?$`)

var giBySlices = map[int]int{
	1: nvml.GPU_INSTANCE_PROFILE_1_SLICE, 2: nvml.GPU_INSTANCE_PROFILE_2_SLICE,
	3: nvml.GPU_INSTANCE_PROFILE_3_SLICE, 4: nvml.GPU_INSTANCE_PROFILE_4_SLICE,
	6: nvml.GPU_INSTANCE_PROFILE_6_SLICE, 7: nvml.GPU_INSTANCE_PROFILE_7_SLICE,
	8: nvml.GPU_INSTANCE_PROFILE_8_SLICE,
}

var giByAttr = map[string]map[int]int{
	"+me":     {1: nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV1, 2: nvml.GPU_INSTANCE_PROFILE_2_SLICE_REV1},
	"+me.all": {1: nvml.GPU_INSTANCE_PROFILE_1_SLICE_ALL_ME, 2: nvml.GPU_INSTANCE_PROFILE_2_SLICE_ALL_ME},
	"+gfx":    {1: nvml.GPU_INSTANCE_PROFILE_1_SLICE_GFX, 2: nvml.GPU_INSTANCE_PROFILE_2_SLICE_GFX, 4: nvml.GPU_INSTANCE_PROFILE_4_SLICE_GFX},
	"-me":     {1: nvml.GPU_INSTANCE_PROFILE_1_SLICE_NO_ME, 2: nvml.GPU_INSTANCE_PROFILE_2_SLICE_NO_ME},
}

var ciBySlices = map[int]int{
	1: nvml.COMPUTE_INSTANCE_PROFILE_1_SLICE, 2: nvml.COMPUTE_INSTANCE_PROFILE_2_SLICE,
	3: nvml.COMPUTE_INSTANCE_PROFILE_3_SLICE, 4: nvml.COMPUTE_INSTANCE_PROFILE_4_SLICE,
	6: nvml.COMPUTE_INSTANCE_PROFILE_6_SLICE, 7: nvml.COMPUTE_INSTANCE_PROFILE_7_SLICE,
	8: nvml.COMPUTE_INSTANCE_PROFILE_8_SLICE,
}

// resolveProfiles assigns each profile its NVML GPU-instance profile id. The id (with the
// memory size) is all NVML reports; the *name* is then derived by go-nvlib and compared with
// the requested one in CheckProfileNames.
func resolveProfiles(reqs []MigProfileRequest) (map[int]profileSpec, error) {
	out := map[int]profileSpec{}
	type parsed struct {
		g, gb int
		attr  string
	}
	ps := make([]parsed, len(reqs))
	for i, r := range reqs {
		m := profileName.FindStringSubmatch(r.Name)
		if m == nil {
			return nil, fmt.Errorf("MIG profile %q: only GPU-instance profiles (<n>g.<m>gb[+me|+me.all|+gfx|-me]) are supported", r.Name)
		}
		g, _ := strconv.Atoi(m[1])
		gb, _ := strconv.Atoi(m[2])
		ps[i] = parsed{g, gb, m[3] + m[4]}
	}
	for i, r := range reqs {
		p := ps[i]
		var id int
		var ok bool
		switch {
		case r.GIProfileID != nil:
			id, ok = *r.GIProfileID, true
		case p.attr == "":
			id, ok = giBySlices[p.g]
			// A second plain 1-slice profile with more memory is NVML's 1_SLICE_REV2
			// (1g.10gb on A100-40GB, 1g.20gb on H100-80GB).
			for j, q := range ps {
				if j != i && p.g == 1 && q.g == 1 && q.attr == "" && q.gb < p.gb {
					id = nvml.GPU_INSTANCE_PROFILE_1_SLICE_REV2
				}
			}
		default:
			id, ok = giByAttr[p.attr][p.g]
		}
		if !ok {
			return nil, fmt.Errorf("MIG profile %q: no NVML GPU-instance profile id for it; give giProfileId", r.Name)
		}
		if _, dup := out[id]; dup {
			return nil, fmt.Errorf("MIG profile %q: GPU-instance profile id %d used twice", r.Name, id)
		}
		if _, ok := ciBySlices[p.g]; !ok {
			return nil, fmt.Errorf("MIG profile %q: no compute-instance profile for %d slices", r.Name, p.g)
		}
		if r.MemoryMiB == 0 || r.InstanceCount == 0 {
			return nil, fmt.Errorf("MIG profile %q: memoryMiB and instanceCount are required", r.Name)
		}
		out[id] = profileSpec{MigProfileRequest: r, giProfileID: id, slices: p.g}
	}
	return out, nil
}

func (p profileSpec) giInfo() nvml.GpuInstanceProfileInfo {
	return nvml.GpuInstanceProfileInfo{
		Id:                  uint32(p.giProfileID),
		SliceCount:          uint32(p.slices),
		InstanceCount:       p.InstanceCount,
		MultiprocessorCount: p.Multiprocessors,
		CopyEngineCount:     p.CopyEngines,
		DecoderCount:        p.Decoders,
		EncoderCount:        p.Encoders,
		JpegCount:           p.Jpegs,
		OfaCount:            p.Ofas,
		MemorySizeMB:        p.MemoryMiB,
	}
}

// The compute instance that spans the whole GPU instance (what mig-parted creates).
func (p profileSpec) ciInfo() nvml.ComputeInstanceProfileInfo {
	return nvml.ComputeInstanceProfileInfo{
		Id:                    uint32(ciBySlices[p.slices]),
		SliceCount:            uint32(p.slices),
		InstanceCount:         1,
		MultiprocessorCount:   p.Multiprocessors,
		SharedCopyEngineCount: p.CopyEngines,
		SharedDecoderCount:    p.Decoders,
		SharedEncoderCount:    p.Encoders,
		SharedJpegCount:       p.Jpegs,
		SharedOfaCount:        p.Ofas,
	}
}

// ---------------------------------------------------------------------------------------

type Server struct {
	mock.Interface
	mock.ExtendedInterface
	gpus []*mockGPU
}

type mockGPU struct {
	mock.Device
	spec *GPU
	gis  map[int]*mockGI
	migs []*mockMIG
}

type mockGI struct {
	mock.GpuInstance
	id      int
	profile profileSpec
	ci      *mockCI
}

type mockCI struct {
	mock.ComputeInstance
}

type mockMIG struct {
	mock.Device
}

var _ nvml.Interface = (*Server)(nil)
var _ nvml.Device = (*mockGPU)(nil)
var _ nvml.Device = (*mockMIG)(nil)

func NewServer(gpus []*GPU, driverVersion string, cudaDriverVersion int) *Server {
	s := &Server{}
	for _, g := range gpus {
		s.gpus = append(s.gpus, newMockGPU(g))
	}
	s.ExtensionsFunc = func() nvml.ExtendedInterface { return s }
	s.LookupSymbolFunc = func(string) error { return nil } // every symbol "exists"; unsupported calls return NOT_SUPPORTED
	s.InitFunc = func() nvml.Return { return nvml.SUCCESS }
	s.ShutdownFunc = func() nvml.Return { return nvml.SUCCESS }
	s.SystemGetDriverVersionFunc = func() (string, nvml.Return) { return driverVersion, nvml.SUCCESS }
	s.SystemGetCudaDriverVersionFunc = func() (int, nvml.Return) { return cudaDriverVersion, nvml.SUCCESS }
	s.SystemGetNVMLVersionFunc = func() (string, nvml.Return) {
		return fmt.Sprintf("%d.%s", cudaDriverVersion/1000, driverVersion), nvml.SUCCESS
	}
	s.DeviceGetCountFunc = func() (int, nvml.Return) { return len(s.gpus), nvml.SUCCESS }
	s.DeviceGetHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if i < 0 || i >= len(s.gpus) {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		return s.gpus[i], nvml.SUCCESS
	}
	s.DeviceGetHandleByUUIDFunc = func(id string) (nvml.Device, nvml.Return) {
		for _, g := range s.gpus {
			if g.spec.uuid == id {
				return g, nvml.SUCCESS
			}
			for _, m := range g.migs {
				if u, _ := m.GetUUID(); u == id {
					return m, nvml.SUCCESS
				}
			}
		}
		return nil, nvml.ERROR_NOT_FOUND
	}
	return s
}

func newMockGPU(g *GPU) *mockGPU {
	d := &mockGPU{spec: g, gis: map[int]*mockGI{}}
	migCapable := g.migCapable
	total := g.MemoryMiB * mib

	d.GetNameFunc = func() (string, nvml.Return) { return g.ProductName, nvml.SUCCESS }
	d.GetUUIDFunc = func() (string, nvml.Return) { return g.uuid, nvml.SUCCESS }
	d.GetIndexFunc = func() (int, nvml.Return) { return g.index, nvml.SUCCESS }
	d.GetMinorNumberFunc = func() (int, nvml.Return) { return g.index, nvml.SUCCESS }
	d.GetBrandFunc = func() (nvml.BrandType, nvml.Return) { return nvml.BRAND_NVIDIA, nvml.SUCCESS }
	d.GetArchitectureFunc = func() (nvml.DeviceArchitecture, nvml.Return) { return archOf(g.Arch), nvml.SUCCESS }
	d.GetCudaComputeCapabilityFunc = func() (int, int, nvml.Return) {
		return g.ComputeMajor, g.ComputeMinor, nvml.SUCCESS
	}
	d.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: total, Free: total}, nvml.SUCCESS
	}
	d.GetPciInfoFunc = func() (nvml.PciInfo, nvml.Return) {
		p := nvml.PciInfo{PciDeviceId: g.deviceID<<16 | 0x10de}
		copy(p.BusId[:], "0000"+strings.ToUpper(g.busID)) // NVML's form: 00000000:18:00.0
		copy(p.BusIdLegacy[:], strings.ToUpper(g.busID))
		return p, nvml.SUCCESS
	}
	d.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return false, nvml.SUCCESS }
	// What the device plugin's health check registers for (XID and ECC events); datacenter GPUs support all three.
	d.GetSupportedEventTypesFunc = func() (uint64, nvml.Return) {
		return nvml.EventTypeXidCriticalError | nvml.EventTypeSingleBitEccError | nvml.EventTypeDoubleBitEccError, nvml.SUCCESS
	}
	// go-gpuallocator (the device plugin's preferred allocation) reads the PCIe path between two GPUs and
	// their NVLinks. No PCIe switch is modelled: GPUs on one NUMA node meet at the CPU (NODE), others
	// only across the interconnect between CPUs (SYSTEM).
	d.GetTopologyCommonAncestorFunc = func(other nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
		o, ok := other.(*mockGPU)
		if !ok {
			return 0, nvml.ERROR_INVALID_ARGUMENT
		}
		if o == d {
			return nvml.TOPOLOGY_INTERNAL, nvml.SUCCESS
		}
		if g.NUMANode > 0 && g.NUMANode == o.spec.NUMANode {
			return nvml.TOPOLOGY_NODE, nvml.SUCCESS
		}
		return nvml.TOPOLOGY_SYSTEM, nvml.SUCCESS
	}
	d.GetNvLinkStateFunc = func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED }
	d.GetNvLinkRemotePciInfoFunc = func(int) (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED }
	d.GetGpuFabricInfoFunc = func() (nvml.GpuFabricInfo, nvml.Return) {
		if g.fabric == nil {
			return nvml.GpuFabricInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return *g.fabric, nvml.SUCCESS
	}
	d.GetAddressingModeFunc = func() (nvml.DeviceAddressingMode, nvml.Return) {
		return nvml.DeviceAddressingMode{}, nvml.ERROR_NOT_SUPPORTED
	}

	d.GetMigModeFunc = func() (int, int, nvml.Return) {
		if !migCapable {
			return 0, 0, nvml.ERROR_NOT_SUPPORTED
		}
		mode := nvml.DEVICE_MIG_DISABLE
		if g.MigEnabled {
			mode = nvml.DEVICE_MIG_ENABLE
		}
		return mode, mode, nvml.SUCCESS
	}
	d.GetGpuInstanceProfileInfoFunc = func(id int) (nvml.GpuInstanceProfileInfo, nvml.Return) {
		if id < 0 || id >= nvml.GPU_INSTANCE_PROFILE_COUNT {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}
		p, ok := g.profiles[id]
		if !ok {
			return nvml.GpuInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return p.giInfo(), nvml.SUCCESS
	}
	d.GetMaxMigDeviceCountFunc = func() (int, nvml.Return) {
		if !migCapable {
			return 0, nvml.ERROR_NOT_SUPPORTED
		}
		return max(7, len(d.migs)), nvml.SUCCESS
	}
	d.GetMigDeviceHandleByIndexFunc = func(i int) (nvml.Device, nvml.Return) {
		if !g.MigEnabled {
			return nil, nvml.ERROR_INVALID_ARGUMENT
		}
		if i < 0 || i >= len(d.migs) {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return d.migs[i], nvml.SUCCESS
	}
	d.GetGpuInstanceByIdFunc = func(id int) (nvml.GpuInstance, nvml.Return) {
		gi, ok := d.gis[id]
		if !ok {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return gi, nvml.SUCCESS
	}

	// One GPU instance per requested MIG device, each with the compute instance that spans it.
	for j, name := range g.MigDevices {
		p, _ := profileByName(g.profiles, name)
		gi := newMockGI(d, j+1, p)
		d.gis[gi.id] = gi
		d.migs = append(d.migs, newMockMIG(d, gi, j))
	}
	return d
}

func newMockGI(parent *mockGPU, id int, p profileSpec) *mockGI {
	gi := &mockGI{id: id, profile: p}
	ci := &mockCI{}
	gi.ci = ci
	gi.GetInfoFunc = func() (nvml.GpuInstanceInfo, nvml.Return) {
		return nvml.GpuInstanceInfo{Device: parent, Id: uint32(id), ProfileId: uint32(p.giProfileID)}, nvml.SUCCESS
	}
	gi.GetComputeInstanceByIdFunc = func(n int) (nvml.ComputeInstance, nvml.Return) {
		if n != 0 {
			return nil, nvml.ERROR_NOT_FOUND
		}
		return ci, nvml.SUCCESS
	}
	gi.GetComputeInstanceProfileInfoFunc = func(ciProfile, engProfile int) (nvml.ComputeInstanceProfileInfo, nvml.Return) {
		if ciProfile < 0 || ciProfile >= nvml.COMPUTE_INSTANCE_PROFILE_COUNT ||
			engProfile < 0 || engProfile >= nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_COUNT {
			return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_INVALID_ARGUMENT
		}
		// Sub-GI compute-instance profiles are not modelled (mig-parted's configs use full CIs).
		if engProfile != nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED || ciProfile != ciBySlices[p.slices] {
			return nvml.ComputeInstanceProfileInfo{}, nvml.ERROR_NOT_SUPPORTED
		}
		return p.ciInfo(), nvml.SUCCESS
	}
	ci.GetInfoFunc = func() (nvml.ComputeInstanceInfo, nvml.Return) {
		return nvml.ComputeInstanceInfo{Device: parent, GpuInstance: gi, Id: 0, ProfileId: uint32(ciBySlices[p.slices])}, nvml.SUCCESS
	}
	return gi
}

func newMockMIG(parent *mockGPU, gi *mockGI, j int) *mockMIG {
	m := &mockMIG{}
	p := gi.profile
	id := "MIG-" + uuid.NewSHA1(uuid.NameSpaceURL, []byte(fmt.Sprintf("nvidia-oracle/mig/%d/%d", parent.spec.index, j))).String()
	m.GetUUIDFunc = func() (string, nvml.Return) { return id, nvml.SUCCESS }
	m.IsMigDeviceHandleFunc = func() (bool, nvml.Return) { return true, nvml.SUCCESS }
	m.GetDeviceHandleFromMigDeviceHandleFunc = func() (nvml.Device, nvml.Return) { return parent, nvml.SUCCESS }
	m.GetGpuInstanceIdFunc = func() (int, nvml.Return) { return gi.id, nvml.SUCCESS }
	m.GetComputeInstanceIdFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
	m.GetIndexFunc = func() (int, nvml.Return) { return j, nvml.SUCCESS }
	m.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
		return nvml.Memory{Total: p.MemoryMiB * mib, Free: p.MemoryMiB * mib}, nvml.SUCCESS
	}
	m.GetAttributesFunc = func() (nvml.DeviceAttributes, nvml.Return) {
		return nvml.DeviceAttributes{
			MultiprocessorCount:       p.Multiprocessors,
			SharedCopyEngineCount:     p.CopyEngines,
			SharedDecoderCount:        p.Decoders,
			SharedEncoderCount:        p.Encoders,
			SharedJpegCount:           p.Jpegs,
			SharedOfaCount:            p.Ofas,
			GpuInstanceSliceCount:     uint32(p.slices),
			ComputeInstanceSliceCount: uint32(p.slices),
			MemorySizeMB:              p.MemoryMiB,
		}, nvml.SUCCESS
	}
	m.GetNameFunc = func() (string, nvml.Return) {
		return parent.spec.ProductName + " MIG " + p.Name, nvml.SUCCESS
	}
	return m
}

// CheckProfileNames derives each profile's name with go-nvlib (from the NVML profile id and
// memory sizes, as every NVIDIA component does) and requires it to equal the requested name.
func (s *Server) CheckProfileNames() error {
	lib := device.New(s)
	for _, g := range s.gpus {
		for _, p := range g.spec.profiles {
			mp, err := lib.NewMigProfile(p.giProfileID, ciBySlices[p.slices], nvml.COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
				p.MemoryMiB, g.spec.MemoryMiB*mib)
			if err != nil {
				return fmt.Errorf("GPU %d, MIG profile %q: %v", g.spec.index, p.Name, err)
			}
			if got := mp.String(); got != p.Name {
				return fmt.Errorf("GPU %d (%s, %d MiB): MIG profile %q has NVML id %d and %d MiB, which NVIDIA names %q",
					g.spec.index, g.spec.ProductName, g.spec.MemoryMiB, p.Name, p.giProfileID, p.MemoryMiB, got)
			}
		}
	}
	return nil
}

func archOf(s string) nvml.DeviceArchitecture {
	switch strings.ReplaceAll(strings.ReplaceAll(strings.ToLower(s), " ", ""), "-", "") {
	case "kepler":
		return nvml.DEVICE_ARCH_KEPLER
	case "maxwell":
		return nvml.DEVICE_ARCH_MAXWELL
	case "pascal":
		return nvml.DEVICE_ARCH_PASCAL
	case "volta":
		return nvml.DEVICE_ARCH_VOLTA
	case "turing":
		return nvml.DEVICE_ARCH_TURING
	case "ampere":
		return nvml.DEVICE_ARCH_AMPERE
	case "ada", "adalovelace":
		return nvml.DEVICE_ARCH_ADA
	case "hopper":
		return nvml.DEVICE_ARCH_HOPPER
	case "blackwell":
		return nvml.DEVICE_ARCH_BLACKWELL
	}
	return nvml.DEVICE_ARCH_UNKNOWN
}
