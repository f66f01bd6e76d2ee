package buildinfo_test

import (
	"fmt"
	"runtime"
	"strings"

	"github.com/pylucid/pylucid/core/buildinfo"
)

func ExampleGet() {
	info := buildinfo.Get()
	fmt.Println(info.GoVersion == runtime.Version(), strings.HasPrefix(info.GoVersion, "go1."))
	fmt.Println(info.Threads >= 1, info.SIMD == strings.HasPrefix(info.Kernels, "simd"))
	// Output:
	// true true
	// true true
}
