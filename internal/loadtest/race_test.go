//go:build race

package loadtest

// raceEnabled reports a build with the race detector.
const raceEnabled = true
