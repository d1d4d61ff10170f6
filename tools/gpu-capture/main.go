// Command gpu-capture records what a real NVIDIA GPU reports through the calls NVIDIA's DRA driver
// (sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1, cmd/gpu-kubelet-plugin/nvlib.go getGpuInfo) and GPU
// Feature Discovery (go-nvlib's IsFabricAttached, VisitMigProfiles) make, with the same library
// versions the driver pins (go-nvlib v0.11.0, go-nvml v0.13.1-0, k8s.io/dynamic-resource-allocation
// v0.36.0-rc.0 for the standard pciBusID and pcieRoot attributes). It only reads: no MIG mode, clock
// or other setting is changed. It prints one JSON document on stdout; each call's error is recorded
// in place of its value, so a call a platform does not support is a fact too.
//
// Run on a GPU machine by tools/gpu-capture/capture.sh; the captures it made live under
// tests/data/captures/ and are read by tests/unit/test_h200_capture.py.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	nvdev "github.com/NVIDIA/go-nvlib/pkg/nvlib/device"
	"github.com/NVIDIA/go-nvlib/pkg/nvpci"
	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/dynamic-resource-allocation/deviceattribute"
)

type result map[string]any

func ret(r nvml.Return) string { return nvml.ErrorString(r) }

func attr(a deviceattribute.DeviceAttribute, err error) any {
	if err != nil {
		return result{"error": err.Error()}
	}
	return result{"name": string(a.Name), "value": a.Value}
}

func orError[T any](v T, err error) any {
	if err != nil {
		return result{"error": err.Error()}
	}
	return v
}

func main() {
	out := result{"tool": "gpu-capture"}
	lib := nvml.New()
	if r := lib.Init(); r != nvml.SUCCESS {
		fmt.Fprintf(os.Stderr, "nvml init: %s\n", ret(r))
		os.Exit(1)
	}
	defer lib.Shutdown()
	dl := nvdev.New(lib)

	drv, r := lib.SystemGetDriverVersion()
	out["driverVersion"] = map[bool]any{true: drv, false: result{"error": ret(r)}}[r == nvml.SUCCESS]
	cuda, r := lib.SystemGetCudaDriverVersion()
	out["cudaDriverVersion"] = map[bool]any{true: cuda, false: result{"error": ret(r)}}[r == nvml.SUCCESS]
	nvmlv, _ := lib.SystemGetNVMLVersion()
	out["nvmlVersion"] = nvmlv

	devices := []result{}
	err := dl.VisitDevices(func(i int, d nvdev.Device) error {
		dev := result{"index": i}
		dev["name"], _ = d.GetName()
		dev["uuid"], _ = d.GetUUID()
		dev["minor"], _ = d.GetMinorNumber()
		dev["brand"] = orError(d.GetBrandAsString())
		dev["architecture"] = orError(d.GetArchitectureAsString())
		dev["cudaComputeCapability"] = orError(d.GetCudaComputeCapabilityAsString())
		dev["addressingMode"] = orError(d.GetAddressingModeAsString())
		mem, r := d.GetMemoryInfo()
		dev["memoryInfo"] = map[bool]any{true: result{"total": mem.Total, "free": mem.Free, "used": mem.Used}, false: result{"error": ret(r)}}[r == nvml.SUCCESS]
		bus, err := d.GetPCIBusID()
		dev["pciBusID"] = orError(bus, err)
		if err == nil {
			dev["pciBusIDAttribute"] = attr(deviceattribute.GetPCIBusIDAttribute(bus))
			dev["pcieRootAttribute"] = attr(deviceattribute.GetPCIeRootAttributeByPCIBusID(bus))
		}
		pci, r := d.GetPciInfo()
		if r == nvml.SUCCESS {
			dev["pciInfo"] = result{"pciDeviceId": fmt.Sprintf("0x%08X", pci.PciDeviceId), "pciSubSystemId": fmt.Sprintf("0x%08X", pci.PciSubSystemId)}
		}
		dev["migCapable"] = orError(d.IsMigCapable())
		dev["migEnabled"] = orError(d.IsMigEnabled())
		cur, pend, r := d.GetMigMode()
		dev["migMode"] = map[bool]any{true: result{"current": cur, "pending": pend}, false: result{"error": ret(r)}}[r == nvml.SUCCESS]
		dev["fabricAttached"] = orError(d.IsFabricAttached())
		fi, r := d.GetGpuFabricInfo()
		if r == nvml.SUCCESS {
			dev["gpuFabricInfo"] = result{"clusterUuid": fmt.Sprintf("%x", fi.ClusterUuid), "status": ret(nvml.Return(fi.Status)), "cliqueId": fi.CliqueId, "state": fi.State}
		} else {
			dev["gpuFabricInfo"] = result{"error": ret(r)}
		}
		// The DRA driver's loop over GPU instance profiles (nvlib.go getGpuInfo).
		profiles := []result{}
		for p := 0; p < nvml.GPU_INSTANCE_PROFILE_COUNT; p++ {
			info, r := d.GetGpuInstanceProfileInfo(p)
			if r != nvml.SUCCESS {
				profiles = append(profiles, result{"profile": p, "error": ret(r)})
				continue
			}
			entry := result{"profile": p, "id": info.Id, "isP2pSupported": info.IsP2pSupported,
				"sliceCount": info.SliceCount, "instanceCount": info.InstanceCount,
				"multiprocessorCount": info.MultiprocessorCount, "copyEngineCount": info.CopyEngineCount,
				"decoderCount": info.DecoderCount, "encoderCount": info.EncoderCount, "jpegCount": info.JpegCount,
				"ofaCount": info.OfaCount, "memorySizeMB": info.MemorySizeMB}
			placements, r := d.GetGpuInstancePossiblePlacements(&info)
			if r == nvml.SUCCESS {
				pl := []result{}
				for _, x := range placements {
					pl = append(pl, result{"start": x.Start, "size": x.Size})
				}
				entry["placements"] = pl
			} else {
				entry["placements"] = result{"error": ret(r)}
			}
			profiles = append(profiles, entry)
		}
		dev["gpuInstanceProfiles"] = profiles
		// go-nvlib's profile names, as GFD and the DRA driver derive them.
		names := []string{}
		if err := d.VisitMigProfiles(func(p nvdev.MigProfile) error {
			names = append(names, p.String())
			return nil
		}); err != nil {
			dev["migProfileNames"] = result{"error": err.Error()}
		} else {
			dev["migProfileNames"] = names
		}
		devices = append(devices, dev)
		return nil
	})
	if err != nil {
		out["visitError"] = err.Error()
	}
	out["devices"] = devices

	// The PCI view the DRA driver's nvpci reads (NUMA node, IOMMU group, driver).
	gpus, err := nvpci.New().GetGPUs()
	if err != nil {
		out["nvpci"] = result{"error": err.Error()}
	} else {
		pl := []result{}
		for _, g := range gpus {
			pl = append(pl, result{"address": g.Address, "path": g.Path, "device": fmt.Sprintf("0x%04x", g.Device),
				"class": fmt.Sprintf("0x%06x", g.Class), "driver": g.Driver, "iommuGroup": g.IommuGroup, "numaNode": g.NumaNode})
		}
		out["nvpci"] = pl
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}
