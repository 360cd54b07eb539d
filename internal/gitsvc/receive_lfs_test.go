package gitsvc

import (
	"strconv"
	"testing"
)

const testOID = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"

func TestLFSPointersReadsBatch(t *testing.T) {
	ptr := "version https://git-lfs.github.com/spec/v1\noid sha256:" + testOID + "\nsize 3\n"
	batch := "aaaa blob " + itoa(len(ptr)) + "\n" + ptr + "\n" + "bbbb blob 6\nhello\n\n"
	oids, err := lfsPointers([]byte(batch))
	if err != nil || len(oids) != 1 || oids["aaaa"] != testOID {
		t.Fatalf("lfsPointers = %v, %v", oids, err)
	}
	if _, err := lfsPointers([]byte("aaaa blob 99\nshort\n")); err == nil {
		t.Error("a truncated batch was read without error")
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
