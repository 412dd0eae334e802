package api

import (
	"encoding/json"
	"fmt"
	"testing"

	"herald/internal/notify"
)

// BenchmarkDecodeLargeSend is the API decoding a 10,000-recipient send: the duplicate-key scan alone,
// and the whole strict decode it is part of.
func BenchmarkDecodeLargeSend(b *testing.B) {
	req := map[string]any{"channels": []string{"push"}, "content": map[string]string{"title": "t", "body": "b"}}
	var rs []map[string]string
	for i := range 10000 {
		rs = append(rs, map[string]string{"fcm_token": fmt.Sprintf("token-%06d-abcdefghijklmnop", i)})
	}
	req["recipients"] = rs
	raw, _ := json.Marshal(req)
	b.Run("scanKeys", func(b *testing.B) {
		for b.Loop() {
			scanKeys(raw)
		}
	})
	b.Run("decodeJSON", func(b *testing.B) {
		for b.Loop() {
			var r notify.SendRequest
			if err := decodeJSON(raw, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
