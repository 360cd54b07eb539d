// Package layers holds no code: its test is the house's floor plan
// (docs/design.md §0). It reads the import graph with go list and fails
// when a package imports one on its own floor or above, when net/http
// reaches below the HTTP edge, or when a package is missing from the
// plan, so the layering is kept by a test rather than by convention.
package layers
