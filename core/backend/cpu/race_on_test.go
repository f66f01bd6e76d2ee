//go:build race

package cpu

// raceEnabled reports whether the race detector is on (tests thin their
// tables under it: it makes scalar loops tens of times slower).
const raceEnabled = true
