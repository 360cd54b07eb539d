//go:build race

package etcdcoord_test

// raceEnabled is true when the race detector instruments the test, and the
// embedded etcd with it, which makes every request several times slower.
const raceEnabled = true
