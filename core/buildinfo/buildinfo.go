// Package buildinfo says what this build of pylucid's core is: the Go
// toolchain that built it, the kernels compiled in (SIMD or the portable
// ones), the CPU features they use on this machine and the CPU backend's
// thread count. Hosts show it (Python's pylucid.show_config(), through
// lucid_build_info); Go programs call Get.
//
// Conventions: Get never fails and reads nothing but the running binary and
// CPU; the Kernels strings are stable ("simd (AVX2)", "simd compiled,
// portable in use (no AVX2)", "portable"), as are the JSON field names.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/pylucid/pylucid/core/backend/cpu"
)

// Info is one build's facts.
type Info struct {
	GoVersion   string   `json:"go_version"`   // the toolchain that built it: "go1.26.8"
	Module      string   `json:"module"`       // the core's module path
	OS          string   `json:"os"`           // runtime.GOOS
	Arch        string   `json:"arch"`         // runtime.GOARCH
	Kernels     string   `json:"kernels"`      // which kernels run (the package doc's strings)
	SIMD        bool     `json:"simd"`         // the SIMD kernels are compiled in
	CPUFeatures []string `json:"cpu_features"` // the CPU features the kernels in use rely on
	Threads     int      `json:"threads"`      // the CPU backend's threads (cpu.Default)
}

// Get returns this build's Info.
func Get() Info {
	i := Info{GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		SIMD: cpu.SIMDCompiled(), CPUFeatures: []string{}, Threads: cpu.Default.Threads()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		i.Module = bi.Main.Path
	}
	switch {
	case cpu.SIMDEnabled():
		i.Kernels = "simd (AVX2)"
		i.CPUFeatures = append(i.CPUFeatures, "AVX2")
	case cpu.SIMDCompiled():
		i.Kernels = "simd compiled, portable in use (no AVX2)"
	default:
		i.Kernels = "portable"
	}
	return i
}

// String formats i as "key: value" lines, as show_config prints them.
func (i Info) String() string {
	var b strings.Builder
	features := strings.Join(i.CPUFeatures, " ")
	if features == "" {
		features = "none"
	}
	fmt.Fprintf(&b, "go: %s\nkernels: %s\ncpu features: %s\nthreads: %d\nplatform: %s/%s\n",
		i.GoVersion, i.Kernels, features, i.Threads, i.OS, i.Arch)
	return b.String()
}
