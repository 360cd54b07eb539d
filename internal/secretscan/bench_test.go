package secretscan

import (
	"os"
	"path/filepath"
	"testing"
)

func netHTTPSources(b *testing.B) ([][]byte, int64) {
	pattern := filepath.Join(goroot(b), "src", "net", "http", "*.go")
	files, _ := filepath.Glob(pattern)
	if len(files) == 0 {
		b.Skipf("this benchmark reads the Go toolchain's sources, and nothing matches %s", pattern)
	}
	var blobs [][]byte
	var n int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		blobs = append(blobs, data)
		n += int64(len(data))
	}
	return blobs, n
}

// BenchmarkScanContent measures the matcher on real source (the Go tree's
// net/http), single-threaded; bench/run.sh measures whole scans.
func BenchmarkScanContent(b *testing.B) {
	blobs, n := netHTTPSources(b)
	e := defaultEngine(b)
	b.SetBytes(n)
	b.ResetTimer()
	for range b.N {
		for _, d := range blobs {
			e.scanContent(d)
		}
	}
}

// BenchmarkScanContentParallel runs the matcher on GOMAXPROCS goroutines
// (go test -bench ScanContentParallel -cpu 1,2): with no shared state in
// the hot path, throughput scales with the cores.
func BenchmarkScanContentParallel(b *testing.B) {
	blobs, n := netHTTPSources(b)
	e := defaultEngine(b)
	b.SetBytes(n)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			for _, d := range blobs {
				e.scanContent(d)
			}
		}
	})
}
