package gitsvc

import (
	"strconv"
	"strings"
	"testing"
)

const testOID = "4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393"

func TestLFSPointersReadsBatch(t *testing.T) {
	ptr := "version https://git-lfs.github.com/spec/v1\noid sha256:" + testOID + "\nsize 3\n"
	// git-lfs smudges a blob whose first 1024 bytes are a pointer,
	// whatever follows.
	padded := "\r\n" + ptr + strings.Repeat(" ", 1100) + "and then anything"
	malformed := strings.Replace(ptr, "size", "size:", 1)
	batch := "aaaa blob " + itoa(len(ptr)) + "\n" + ptr + "\n" +
		"bbbb blob 6\nhello\n\n" +
		"cccc blob " + itoa(len(padded)) + "\n" + padded + "\n" +
		"dddd blob " + itoa(len(malformed)) + "\n" + malformed + "\n"
	oids, shaped, err := lfsPointers(strings.NewReader(batch))
	if err != nil || len(oids) != 2 || oids["aaaa"].OID != testOID || oids["cccc"].OID != testOID || oids["aaaa"].Size != 3 {
		t.Fatalf("lfsPointers = %v, %v", oids, err)
	}
	if len(shaped) != 1 || shaped[0] != "dddd" {
		t.Errorf("malformed pointers: %v", shaped)
	}
	for _, cut := range []string{"aaaa blob 99\nshort\n", "aaaa blob 2000\n" + padded[:1200]} {
		if _, _, err := lfsPointers(strings.NewReader(cut)); err == nil {
			t.Errorf("a truncated batch was read without error: %.30q", cut)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
