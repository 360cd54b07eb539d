// Package clustertest is a fault test of a whole ghost cluster, run the
// way an operator would before trusting ghost with production (issue 26):
// three "ghost serve" processes (the built binary), a three-member etcd
// cluster (etcd's own server main, from the go.etcd.io/etcd/server/v3
// version go.mod pins, run as separate processes) and an S3 gateway
// (versitygw with its posix backend, so the bucket survives SIGKILL), all
// on 127.0.0.1. Stock git clients push over HTTP through the nodes, some
// commits holding planted fake secrets, and clone, while a seeded schedule
// SIGKILLs and SIGSTOPs nodes, etcd members and the gateway. After the
// faults heal it checks the git data (every acknowledged push present,
// each ref's history a chain, identical and fsck-clean clones from every
// node and from a fresh one), that every planted secret in an
// acknowledged push has exactly one alert within a bounded time, that the
// coordination shard counters are exact, and that "ghost gc --dry-run"
// lists nothing referenced.
//
// The test lives in this package's test files and runs only when
// GHOST_CLUSTER is set, so "go test ./..." skips it:
//
//	GHOST_CLUSTER=short go test -count=1 -timeout 15m -run '^TestCluster$' -v ./internal/clustertest/
//	GHOST_CLUSTER=long  go test -count=1 -timeout 40m -run '^TestCluster$' -v ./internal/clustertest/
//
// GHOST_CLUSTER_SEED=<n> repeats a run's fault schedule and seeds its
// clients' choices alike (the seed is printed at the start and in the
// report); what processes do in time still varies from run to run. It needs git and versitygw
// (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0) on PATH
// or in $(go env GOPATH)/bin.
package clustertest
