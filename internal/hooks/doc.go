// Package hooks is what ghost delivers to webhooks and when: hooks as
// records (per repository and per tenant), events enqueued where they
// happen, and a dispatcher that follows each repository's log with a
// per-hook watermark, so that a push is delivered however the node that
// took it fares (docs/design.md §10.8,
// docs/adr/0105-webhook-delivery.md). How one event is posted (GitHub's
// headers and signature, the SSRF guard) is package webhook's.
//
// Key layout (docs/design.md §2.3):
//
//	hooks/sets/r/<repoID>                every hook of a repository, one record by compare-and-swap
//	hooks/sets/t/<tenant>                every hook of a tenant (all its repositories)
//	hooks/pending/<stream>               a stream with events hooks may not have seen yet
//	hooks/state/<stream>/<hookKey>       a hook's progress on a stream: the log watermark, the event in retry
//	hooks/queue/<stream>/<hookKey>/<id>  an event that is not in the log, waiting for its hook
//	hooks/layers/<repoID>/<seq>          a folded layer's header, kept for hooks that had not delivered it
//	hooks/deliveries/<hookKey>/<id>      the delivery log, newest first
//
// A stream is a repository's log id, or "~<tenant>" for a tenant hook's
// own events (its pings).
package hooks
