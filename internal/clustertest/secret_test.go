package clustertest

import (
	"math/rand/v2"
	"testing"
)

// TestFakeSecretsClearTheEntropyThreshold runs without GHOST_CLUSTER: the
// cluster test counts every planted secret that goes unalerted as a
// scanning failure, so every secret it plants must be one the rules
// report. gitleaks' github-pat and aws-access-token rules ask for an
// entropy of at least 3; a random AWS key id falls below it about once
// in 5,500 draws, and below minSecretEntropy about once in 80, which is
// what this test can see fail when the redraw is removed.
func TestFakeSecretsClearTheEntropyThreshold(t *testing.T) {
	if h := entropy("AKIAIA7GJW77I7DGH7J7"); h >= 3 {
		t.Fatalf("entropy of a known low-entropy key id = %.2f, want < 3", h)
	}
	if minSecretEntropy < 3 {
		t.Fatalf("minSecretEntropy %.2f is below the rules' threshold 3", minSecretEntropy)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 5000 {
		s := fakeSecret(rng)
		if h := entropy(s.secret); h < minSecretEntropy {
			t.Fatalf("planted secret %s has entropy %.2f, below %.2f", s.secret, h, minSecretEntropy)
		}
	}
}
