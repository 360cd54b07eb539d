package codec

// DecodedSpan is where the segment's decoded value lies in the text
// Decoder.Decode returned (ghost: lets the caller rescan only near it).
func (s *EncodedSegment) DecodedSpan() (start, end int) {
	return s.decoded.start, s.decoded.end
}
