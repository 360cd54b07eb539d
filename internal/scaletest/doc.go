// Package scaletest measures what ghost asks of the object store and of
// etcd as an installation grows (issue 22 §6, §7): the requests of each
// user operation (push, clone, fetch, scans, page views) and of an idle
// cluster's background loops, counted by the countstore decorator and by
// interceptors on the etcd client, against 1k to 1M repositories and 1 to
// 100 nodes simulated over virtual time. Its tests are the measurement;
// the package has no code of its own. docs/design.md §9.1 has the tables
// and the commands.
package scaletest
