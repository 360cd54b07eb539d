// Package secretscan finds credentials in git histories and directories
// with gitleaks-compatible rules, scanning each unique blob once.
//
// Of the three scanning packages (docs/adr/0116-scanner-package-name.md),
// it is the engine alone, storing nothing and knowing no push or run:
// package pushprotect uses it to check a push before its commit point,
// package scanner to scan committed history in runs.
//
// A scan has two phases (docs/adr/0030-secret-scanning-engine.md):
//
//  1. Engine.ScanRepo (all reachable blobs) or Engine.ScanObjects (given
//     blob ids, for push protection) streams blobs through one git
//     cat-file --batch and matches them in parallel: an Aho–Corasick pass
//     over every rule's keywords, then each triggered rule's regexp in
//     windows around its keyword hits, then entropy, allowlists and
//     stopwords. What survives is kept per blob.
//  2. BlobScan.Attribute reads git log --raw once and reports each
//     candidate at the commit and path whose diff added it, after the
//     path- and commit-dependent allowlists and .gitleaksignore.
//
// Engine.ScanDir scans a plain directory in one phase.
package secretscan
