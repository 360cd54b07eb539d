//go:build !race

package etcdcoord_test

const raceEnabled = false
