package main

// NVML event sets over the config's eventsFile: one JSON object per line,
//
//	{"uuid": "GPU-...", "xid": 79}                      an XID critical error on that GPU
//	{"uuid": "GPU-...", "xid": 79, "gi": 1, "ci": 0}    ... on one of its MIG devices
//
// A set delivers the lines appended after it was created (a restarted agent does not see old
// faults again), to the GPUs registered on it for XID events, one per nvmlEventSetWait call.

// #include <stdlib.h>
import "C"

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
	"unsafe"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// eventData mirrors nvmlEventData_t.
type eventData struct {
	Device            unsafe.Pointer
	EventType         uint64
	EventData         uint64
	GpuInstanceId     uint32
	ComputeInstanceId uint32
}

type eventLine struct {
	UUID string  `json:"uuid"`
	XID  uint64  `json:"xid"`
	GI   *uint32 `json:"gi,omitempty"`
	CI   *uint32 `json:"ci,omitempty"`
}

type eventSet struct {
	waiting sync.Mutex // one waiter at a time; guards offset
	offset  int64
	masks   map[unsafe.Pointer]uint64 // device handle -> registered event types; guarded by mu
}

// pollInterval is how often a waiting set looks for appended lines.
const pollInterval = 100 * time.Millisecond

func fileSize(path string) int64 {
	if st, err := os.Stat(path); err == nil {
		return st.Size()
	}
	return 0
}

//export nvmlEventSetCreate
func nvmlEventSetCreate(out *unsafe.Pointer) C.int {
	return call("nvmlEventSetCreate", func() nvml.Return {
		set := &eventSet{masks: map[unsafe.Pointer]uint64{}}
		if cfg.EventsFile != "" {
			set.offset = fileSize(cfg.EventsFile)
		}
		return putHandle(out, set, nvml.SUCCESS)
	})
}

//export nvmlDeviceGetSupportedEventTypes
func nvmlDeviceGetSupportedEventTypes(h unsafe.Pointer, out *C.ulonglong) C.int {
	return onDevice("nvmlDeviceGetSupportedEventTypes", h, func(d nvml.Device) nvml.Return {
		types, ret := d.GetSupportedEventTypes()
		if ret == nvml.SUCCESS {
			*out = C.ulonglong(types)
		}
		return ret
	})
}

//export nvmlDeviceRegisterEvents
func nvmlDeviceRegisterEvents(h unsafe.Pointer, types C.ulonglong, s unsafe.Pointer) C.int {
	return onDevice("nvmlDeviceRegisterEvents", h, func(d nvml.Device) nvml.Return {
		set, ok := byHandle[s].(*eventSet)
		if !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		supported, ret := d.GetSupportedEventTypes()
		if ret != nvml.SUCCESS {
			return ret
		}
		if uint64(types)&^supported != 0 {
			return nvml.ERROR_NOT_SUPPORTED
		}
		set.masks[h] |= uint64(types)
		return nvml.SUCCESS
	})
}

//export nvmlEventSetFree
func nvmlEventSetFree(s unsafe.Pointer) C.int {
	return call("nvmlEventSetFree", func() nvml.Return {
		if _, ok := byHandle[s].(*eventSet); !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		delete(byObject, byHandle[s])
		delete(byHandle, s)
		C.free(s)
		return nvml.SUCCESS
	})
}

//export nvmlEventSetWait_v2
func nvmlEventSetWait_v2(s unsafe.Pointer, out unsafe.Pointer, timeoutms C.uint) C.int {
	var set *eventSet
	ret := call("nvmlEventSetWait_v2", func() nvml.Return {
		var ok bool
		if set, ok = byHandle[s].(*eventSet); !ok {
			return nvml.ERROR_INVALID_ARGUMENT
		}
		return nvml.SUCCESS
	})
	if ret != code(nvml.SUCCESS) {
		return ret
	}
	set.waiting.Lock()
	defer set.waiting.Unlock()
	deadline := time.Now().Add(time.Duration(timeoutms) * time.Millisecond)
	for {
		if ev, ok := set.next(); ok {
			*(*eventData)(out) = ev
			return code(nvml.SUCCESS)
		}
		if !time.Now().Before(deadline) {
			return code(nvml.ERROR_TIMEOUT)
		}
		time.Sleep(min(pollInterval, time.Until(deadline)))
	}
}

// next reads complete lines appended since the set's offset and returns the first event for a GPU
// registered on the set; lines for others are consumed. A malformed line is reported and skipped.
func (set *eventSet) next() (eventData, bool) {
	if cfg.EventsFile == "" {
		return eventData{}, false
	}
	f, err := os.Open(cfg.EventsFile)
	if err != nil {
		return eventData{}, false
	}
	defer f.Close()
	if _, err := f.Seek(set.offset, io.SeekStart); err != nil {
		return eventData{}, false
	}
	r := bufio.NewReader(f)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil { // no complete line yet
			return eventData{}, false
		}
		set.offset += int64(len(line))
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var ev eventLine
		if err := json.Unmarshal(line, &ev); err != nil || ev.UUID == "" {
			fmt.Fprintf(os.Stderr, "%s: %s: skipping %q (want {\"uuid\": \"GPU-...\", \"xid\": N})\n",
				prefix, cfg.EventsFile, bytes.TrimSpace(line))
			continue
		}
		if data, ok := set.deliver(ev); ok {
			return data, true
		}
	}
}

func (set *eventSet) deliver(ev eventLine) (eventData, bool) {
	mu.Lock()
	defer mu.Unlock()
	d, ret := srv.DeviceGetHandleByUUID(ev.UUID)
	if ret != nvml.SUCCESS {
		fmt.Fprintf(os.Stderr, "%s: %s: no simulated GPU %s\n", prefix, cfg.EventsFile, ev.UUID)
		return eventData{}, false
	}
	h := handleOf(d)
	if set.masks[h]&nvml.EventTypeXidCriticalError == 0 {
		return eventData{}, false
	}
	data := eventData{Device: h, EventType: nvml.EventTypeXidCriticalError, EventData: ev.XID,
		GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}
	if ev.GI != nil {
		data.GpuInstanceId = *ev.GI
	}
	if ev.CI != nil {
		data.ComputeInstanceId = *ev.CI
	}
	return data, true
}
