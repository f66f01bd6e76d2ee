//go:build !linux

package tensor

// heapLimit is unknown on this system (0): Go-heap requests are then limited
// only by what fits in an int.
func heapLimit() int { return 0 }
