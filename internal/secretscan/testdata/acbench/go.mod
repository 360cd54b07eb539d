module acbench

go 1.26

require (
	github.com/BobuSumisu/aho-corasick v1.0.3
	github.com/cloudflare/ahocorasick v0.0.0-20240916140611-054963ec9396
	github.com/coregx/ahocorasick v0.3.1
	github.com/petar-dambovaliev/aho-corasick v0.0.0-20250424160509-463d218d4745
)
