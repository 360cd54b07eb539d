package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Sign returns the X-Hub-Signature-256 value of body under secret,
// "sha256=" and the hex HMAC-SHA256, as GitHub sends it, so receivers
// written for GitHub verify ghost's deliveries unchanged.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}
