// Package scanner runs secret scans over the coordinator (issue 13,
// docs/adr/0032-scan-runs.md): every committed push gets a push run over
// the blobs its layer added, and `ghost repo scan` starts a full-history
// run over every blob of the repository. A run is split into shards over
// the object-id space; workers (in-process under `ghost serve`, or
// standalone `ghost worker` processes reading the same object store and
// etcd) claim shards, scan their blobs in id order with package
// secretscan, record findings with package alerts, checkpoint their
// cursor, and split long shards so idle workers can help.
//
// Of the three scanning packages (docs/adr/0116-scanner-package-name.md),
// it scans what was committed, after the commit point, in runs that
// workers share; package pushprotect checks one push before its commit
// point; both match with package secretscan's engine.
//
// What lives where:
//
//	scans/<repoID>/runs/<seq>-<kind>       the run's descriptor (object store)
//	scans/<repoID>/watermark               push runs done through seq
//	scans/active/<kind>/<tenant>/<repoID>/<seq>  a run workers should look at
//	etcd (package coord)                   the run, its shards, leases, cursors
//
// A run is identified by (tenant, repository, kind, seq): its coord run id
// and every op id derive from that, so starting it twice, from two nodes
// or from the reconciler after etcd came back, is the same run.
package scanner
