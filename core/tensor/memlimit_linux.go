package tensor

import (
	"math"
	"syscall"
)

// heapLimit is the machine's RAM plus swap, in bytes (0 if unknown).
func heapLimit() int {
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	unit := uint64(max(si.Unit, 1))
	total := uint64(si.Totalram) + uint64(si.Totalswap)
	if total == 0 || total > uint64(math.MaxInt)/unit {
		return 0
	}
	return int(total * unit)
}
