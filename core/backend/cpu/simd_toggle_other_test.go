//go:build !(goexperiment.simd && amd64)

package cpu

import "testing"

// withSIMD: without GOEXPERIMENT=simd there are no fast paths to switch.
func withSIMD(*testing.T, bool) {}
