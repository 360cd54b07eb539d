// Package codec finds base64, hex, percent- and unicode-escaped segments
// in text, decodes them and maps positions in the decoded text back to the
// original, so secrets that appear only encoded are found as gitleaks
// finds them (docs/adr/0030-secret-scanning-engine.md, "Decoding").
//
// It is gitleaks v8.30.1's detect/codec package
// (github.com/zricethezav/gitleaks/v8), MIT licensed (see
// ../gitleaks/LICENSE), copied with only its logging calls removed and the
// standard regexp package in place of gitleaks' alias of it. Its
// package-level encoding table is built once in init and never changed.
package codec
