//go:build !race

package tests_go

// raceEnabled reports whether the race detector is on (it allocates, so
// allocation counts are meaningless under it).
const raceEnabled = false
