package coord

import (
	"testing"
	"time"
)

var (
	goldenTenant = TenantID{0: 0xAB, 31: 0xCD}
	goldenLease  = Lease{Tenant: goldenTenant, Run: 7, Shard: 3, Worker: 42, Fence: 5, Deadline: 123}
)

type goldenVector struct {
	name string
	hash Digest
}

// goldenVectors computes the payload hash of one request of each kind.
func goldenVectors() []goldenVector {
	cursor := Cursor{HasKey: true, Key: []byte("key"), Token: []byte("tok")}
	return []goldenVector{
		{"create-run", CreateRunRequest{Tenant: goldenTenant, Run: 7, Op: 1, Config: RunConfig{LeaseDuration: 30 * time.Second, Cursor: CursorNonDecreasing, MaxRetries: 3}}.PayloadHash()},
		{"register-shards", RegisterShardsRequest{Tenant: goldenTenant, Run: 7, Op: 2, Shards: []ShardSpec{
			{ID: 1, Start: nil, End: []byte("m"), Metadata: []byte("md")},
			{ID: 2, Start: []byte("m"), Cursor: cursor},
		}}.PayloadHash()},
		{"acquire", AcquireRequest{Tenant: goldenTenant, Run: 7, Shard: 3, Worker: 42, Op: 3}.PayloadHash()},
		{"claim", ClaimRequest{Tenant: goldenTenant, Run: 7, Worker: 42, Op: 3}.PayloadHash()},
		{"renew", RenewRequest{Lease: goldenLease, Op: 4}.PayloadHash()},
		{"checkpoint", CheckpointRequest{Lease: goldenLease, Op: 5, Cursor: cursor}.PayloadHash()},
		{"checkpoint-no-key", CheckpointRequest{Lease: goldenLease, Op: 5, Cursor: Cursor{Token: []byte("tok")}}.PayloadHash()},
		{"complete", CompleteRequest{Lease: goldenLease, Op: 6}.PayloadHash()},
		{"park", ParkRequest{Lease: goldenLease, Op: 7, Reason: "poison"}.PayloadHash()},
		{"unpark", UnparkRequest{Tenant: goldenTenant, Run: 7, Shard: 3, Op: 8}.PayloadHash()},
		{"split-replace", SplitReplaceRequest{Lease: goldenLease, Op: 9, Children: []ChildSpec{
			{Start: []byte("a"), End: []byte("f"), Metadata: []byte{}}, {Start: []byte("f"), End: nil},
		}}.PayloadHash()},
		{"split-residual", SplitResidualRequest{Lease: goldenLease, Op: 10, Key: []byte("q")}.PayloadHash()},
		{"complete-run", CompleteRunRequest{Tenant: goldenTenant, Run: 7, Op: 11}.PayloadHash()},
		{"fail-run", FailRunRequest{Tenant: goldenTenant, Run: 7, Op: 12, Reason: "boom"}.PayloadHash()},
		{"cancel-run", CancelRunRequest{Tenant: goldenTenant, Run: 7, Op: 13}.PayloadHash()},
	}
}

// TestPayloadHashGolden pins the idempotency hashes. Every backend stores
// them, so a change here is a storage format change. The acquire, checkpoint
// and child-id vectors were cross-checked with an independent Python
// implementation of the documented encoding.
func TestPayloadHashGolden(t *testing.T) {
	want := map[string]string{
		"create-run":        "eaf76a07fc44222a2ba17c4ec59fd983a2830aae9cb296f27bc87df508998102",
		"register-shards":   "2ab24c70fee7db2b95ceec08ee737e18d84414f322c1ba802df4eb119f8e2637",
		"acquire":           "f07dac95a155f324a810a52c171f3144d2691ce2a16b50fe43123a59c233389f",
		"claim":             "d515f88d6d3b1cd90713afb61b6f3afaddd2adef8fd704576fc1c1482bd45c03",
		"renew":             "4860f55a666de69a9c29a0535b75055ba2d6ad2dc3d4482a2a370051ac0a67dd",
		"checkpoint":        "56e347bbc6897ad340f2821f6fea9d45fd4b95de58854990365c740ffe851601",
		"checkpoint-no-key": "45283e3dad881c73cd3824e8b282bbc88fdd0769d49b2bb50dff403ec1f5be3a",
		"complete":          "109780d330660d7e2bb70265ced6cbcc5538aba2f9edf81747a3c23c82aa00d1",
		"park":              "0e27b570a8ed9e92f2b5c1f5b700d539fc790dda765bc945faf21ffa98bee46c",
		"unpark":            "3945b000b7b0602c526192f37e98fd074e41c1d9f07ac1f529d9839a93fcddd1",
		"split-replace":     "b3d9813682b5f51d4148289c4e34a267582fca7c123e5a073dd65db0d0843097",
		"split-residual":    "536b2ba1e361495851d1b156f49f78f07c78e8399e544298968df98ee0992162",
		"complete-run":      "8d4cf0013b9504c959d3bccb728f7262322966f95bfd4173923156c5af0ee8fb",
		"fail-run":          "03d0ab707b992b2a7db825dea5bd9a26306938ab17b76d7a4fc418d123a8d04a",
		"cancel-run":        "6acbadb8b21fcf63299fa12a8e26ddee446f71dcf2c4e1b637d8b92d1eca55d1",
	}
	vs := goldenVectors()
	if len(vs) != len(want) {
		t.Fatalf("%d vectors, %d expected hashes", len(vs), len(want))
	}
	seen := map[Digest]string{}
	for _, v := range vs {
		if got := v.hash.String(); got != want[v.name] {
			t.Errorf("%s: hash %s, want %s", v.name, got, want[v.name])
		}
		if other, dup := seen[v.hash]; dup {
			t.Errorf("%s and %s hash equal", v.name, other)
		}
		seen[v.hash] = v.name
	}
}

func TestPayloadHashSeparatesFields(t *testing.T) {
	base := CheckpointRequest{Lease: goldenLease, Op: 5, Cursor: Cursor{HasKey: true, Key: []byte("ab"), Token: []byte("c")}}
	h := base.PayloadHash()
	mods := map[string]func(*CheckpointRequest){
		"key/token boundary": func(r *CheckpointRequest) { r.Cursor.Key, r.Cursor.Token = []byte("a"), []byte("bc") },
		"has key":            func(r *CheckpointRequest) { r.Cursor.HasKey = false },
		"fence":              func(r *CheckpointRequest) { r.Lease.Fence++ },
		"worker":             func(r *CheckpointRequest) { r.Lease.Worker++ },
		"shard":              func(r *CheckpointRequest) { r.Lease.Shard++ },
		"tenant":             func(r *CheckpointRequest) { r.Lease.Tenant[5]++ },
	}
	for name, mod := range mods {
		r := base
		mod(&r)
		if r.PayloadHash() == h {
			t.Errorf("%s: hash unchanged", name)
		}
	}
	// Neither the op id nor the informational deadline is part of the payload.
	r := base
	r.Op, r.Lease.Deadline = 99, 99
	if r.PayloadHash() != h {
		t.Errorf("op id or deadline changed the payload hash")
	}
	// nil and empty metadata differ in a split: nil means "inherit".
	a := SplitResidualRequest{Lease: goldenLease, Op: 1, Key: []byte("k")}
	b := a
	b.Metadata = []byte{}
	if a.PayloadHash() == b.PayloadHash() {
		t.Errorf("nil and empty residual metadata hash equal")
	}
}

func TestDeriveShardID(t *testing.T) {
	if got := DeriveShardID(7, 3, 99, SplitKindReplace, 0); got != 0x9967d20e76acda86 {
		t.Fatalf("DeriveShardID golden = %#x", uint64(got))
	}
	if got := DeriveShardID(7, 3, 99, SplitKindResidual, 0); got != 0xfaf619cfced757c1 {
		t.Fatalf("DeriveShardID residual golden = %#x", uint64(got))
	}
	seen := map[ShardID]bool{}
	for run := RunID(1); run <= 3; run++ {
		for parent := ShardID(1); parent <= 3; parent++ {
			for op := OpID(1); op <= 3; op++ {
				for _, k := range []SplitKind{SplitKindReplace, SplitKindResidual} {
					for i := uint32(0); i < 4; i++ {
						id := DeriveShardID(run, parent, op, k, i)
						if !id.IsDerived() || seen[id] {
							t.Fatalf("DeriveShardID(%d,%d,%d,%d,%d) = %v: not derived or repeated", run, parent, op, k, i, id)
						}
						seen[id] = true
						if DeriveShardID(run, parent, op, k, i) != id {
							t.Fatal("DeriveShardID is not deterministic")
						}
					}
				}
			}
		}
	}
}

func TestClaimOffset(t *testing.T) {
	if ClaimOffset(5, 0) != 0 || ClaimOffset(5, -1) != 0 {
		t.Fatal("ClaimOffset with no candidates must be 0")
	}
	// Sequential worker ids spread over the candidates.
	const n = 16
	hits := make([]int, n)
	for w := WorkerID(1); w <= 64; w++ {
		o := ClaimOffset(w, n)
		if o < 0 || o >= n {
			t.Fatalf("ClaimOffset(%d, %d) = %d", w, n, o)
		}
		hits[o]++
	}
	used := 0
	for _, h := range hits {
		if h > 0 {
			used++
		}
	}
	if used < n*3/4 {
		t.Fatalf("64 workers start on only %d of %d offsets: %v", used, n, hits)
	}
}
