package notify

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

// flatStrings are values that take every path of the writer and the reader.
var flatStrings = []string{"", "u-1", "a b", "dQw4w9WgXcQ:APA91b-token_x", "ü", "한국어", "line\nbreak", "tab\t", `quote"`,
	`back\slash`, "<b>&amp;</b>", "\u2028\u2029", "\x7f", "\xff\xfe", "bad \xc3", "\x00", "/", "emoji 😀"}

func randomRecipients(rng *rand.Rand, n int) []Recipient {
	pick := func() string {
		if rng.IntN(3) == 0 {
			return ""
		}
		return flatStrings[rng.IntN(len(flatStrings))]
	}
	rs := make([]Recipient, n)
	for i := range rs {
		rs[i] = Recipient{UserID: pick(), Email: pick(), Phone: pick(), FCMToken: pick(), APNsToken: pick(), App: pick()}
	}
	return rs
}

func TestAppendRecipientsIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, rs := range [][]Recipient{nil, {}, {{}}, randomRecipients(rng, 1), randomRecipients(rng, 300)} {
		want, err := json.Marshal(rs)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendRecipients(nil, rs); string(got) != string(want) {
			t.Fatalf("AppendRecipients:\n got %s\nwant %s", got, want)
		}
	}
	for _, s := range flatStrings {
		want, _ := json.Marshal(s)
		if got := AppendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("AppendJSONString(%q) = %s, want x%s", s, got, want)
		}
	}
}

// checkLikeEncodingJSON decodes doc both ways and fails unless they agree: the same recipients,
// or both an error.
func checkLikeEncodingJSON(t *testing.T, doc string) {
	t.Helper()
	var want []Recipient
	wantErr := json.Unmarshal([]byte(doc), &want)
	if nilRoom, err := DecodeRecipients([]byte(doc), nil); err == nil && wantErr == nil && (nilRoom == nil) != (want == nil) {
		t.Fatalf("%q into no room: nil %v, encoding/json's %v", doc, nilRoom == nil, want == nil)
	}
	got, err := DecodeRecipients([]byte(doc), make([]Recipient, 3, 8))
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%q: error %v, encoding/json's %v", doc, err, wantErr)
	}
	if err == nil && !(len(got) == 0 && len(want) == 0) && !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", doc, got, want)
	}
	if err == nil && (got == nil) != (want == nil) {
		t.Fatalf("%q: nil %v, encoding/json's %v", doc, got == nil, want == nil)
	}
}

func TestDecodeRecipientsIsEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{0, 1, 2, 500} {
		b, _ := json.Marshal(randomRecipients(rng, n))
		checkLikeEncodingJSON(t, string(b))
		fast, ok := decodeRecipientsFlat(b, nil)
		if n > 0 && ok {
			// Documents with escapes or bad UTF-8 in them go to encoding/json; the rest are read here.
			for _, r := range fast {
				for _, s := range []string{r.UserID, r.Email, r.Phone, r.FCMToken, r.APNsToken, r.App} {
					if s == "\x00" || s == `quote"` {
						t.Fatalf("read an escaped value itself: %q", s)
					}
				}
			}
		}
	}
	plain, _ := json.Marshal([]Recipient{{UserID: "u-1", FCMToken: "t-1"}, {Email: "a@example.com", App: "ios"}})
	if _, ok := decodeRecipientsFlat(plain, nil); !ok {
		t.Fatalf("a plain document was not read without encoding/json: %s", plain)
	}
	for _, doc := range []string{
		`[]`, ` [ ] `, `null`, `[{}]`, `[{},{}]`, "[\n {\"user_id\" : \"u\" ,\"app\":\"a\"}\t]\r\n",
		`[{"user_id":"a","user_id":"b"}]`, // the last wins
		`[{"USER_ID":"u"}]`,               // encoding/json matches keys without case
		`[{"user\u005fid":"u"}]`,          // an escaped key
		`[{"user_id":"\u00fc"}]`, `[{"user_id":"a\"b"}]`, `[{"user_id":"\ud800"}]`,
		`[{"user_id":null}]`, `[{"user_id":1}]`, `[{"user_id":true}]`, `[{"other":"x"}]`, `[{"user_id":"u","extra":[1,{"a":2}]}]`,
		`[{"user_id":"u"}] x`, `[{"user_id":"u"},]`, `[{"user_id":"u",}]`, `[{"user_id" "u"}]`, `[{"user_id":"u"}`, `[`, ``, ` `,
		`{"user_id":"u"}`, `["u"]`, `[null]`, `[{"user_id":"u"}]]`, "[{\"user_id\":\"a\x01b\"}]", "[{\"user_id\":\"\xff\"}]",
		"[{\"user_id\":\"ok \xe2\x80\xa8\"}]", `[{"user_id":"u"}`, `[{"user_id":"u"},{"email":"e"},{"phone":"+8210"},{"fcm_token":"f"},{"apns_token":"a"}]`,
	} {
		checkLikeEncodingJSON(t, doc)
	}
}

func FuzzDecodeRecipients(f *testing.F) {
	for _, seed := range []string{`[]`, `[{"user_id":"u","fcm_token":"t"}]`, `[{"app":"a\u0041"}]`, `null`, `[{"email":1}]`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) { checkLikeEncodingJSON(t, doc) })
}

func TestFlatReaderInt(t *testing.T) {
	for doc, want := range map[string]int{`0`: 0, ` 7`: 7, `123456789`: 123456789} {
		if got, ok := NewFlatReader([]byte(doc)).Int(); !ok || got != want {
			t.Errorf("Int(%q) = %d, %v", doc, got, ok)
		}
	}
	for _, doc := range []string{``, `-1`, `01`, `1.5`, `1e3`, `1234567890`, `x`} {
		if got, ok := NewFlatReader([]byte(doc)).Int(); ok {
			t.Errorf("Int(%q) = %d, want not read", doc, got)
		}
	}
}

func BenchmarkRecipients500(b *testing.B) {
	rs := make([]Recipient, 500)
	for i := range rs {
		rs[i] = Recipient{FCMToken: fmt.Sprintf("e2e-%07d-bench-token-padding-to-a-realistic-length", i)}
	}
	doc, _ := json.Marshal(rs)
	b.Run("encode/encoding-json", func(b *testing.B) {
		for b.Loop() {
			_, _ = json.Marshal(rs)
		}
	})
	b.Run("encode/flat", func(b *testing.B) {
		for b.Loop() {
			_ = AppendRecipients(make([]byte, 0, len(doc)), rs)
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		for b.Loop() {
			out := make([]Recipient, 0, 500)
			_ = json.Unmarshal(doc, &out)
		}
	})
	b.Run("decode/flat", func(b *testing.B) {
		for b.Loop() {
			_, _ = DecodeRecipients(doc, make([]Recipient, 0, 500))
		}
	})
}

// checkSendRequestLikeEncodingJSON fails if ReadSendRequestFlat reads doc otherwise than a
// json.Decoder with DisallowUnknownFields would; it reports whether doc was read flat.
func checkSendRequestLikeEncodingJSON(t *testing.T, doc string) bool {
	t.Helper()
	want := SendRequest{Recipients: RecipientsRoom([]byte(doc))}
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.DisallowUnknownFields()
	wantErr := dec.Decode(&want)
	got := SendRequest{Recipients: RecipientsRoom([]byte(doc)), Locale: "before"}
	if !ReadSendRequestFlat([]byte(doc), &got) {
		if got.Locale != "before" {
			t.Fatalf("%q: not read, but the request was changed: %#v", doc, got)
		}
		return false
	}
	if wantErr != nil {
		t.Fatalf("%q: read flat, but encoding/json says %v", doc, wantErr)
	}
	if len(got.Recipients) == 0 && len(want.Recipients) == 0 {
		got.Recipients, want.Recipients = nil, nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q:\n got %#v\nwant %#v", doc, got, want)
	}
	return true
}

func TestDecodeSendRequestIsEncodingJSON(t *testing.T) {
	flat := []string{
		`{"channels":["push"],"content":{"title":"Hi","body":"there","data":{"k":"v"}},"recipients":[{"fcm_token":"t1"},{"user_id":"u2"}]}`,
		`{"version":1,"idempotency_key":"k-1","category":"marketing","channels":["push","inbox"],"content":{"title":"A \"quoted\" title"},` +
			`"localized":{"ko":{"title":"안녕"}},"recipients":[{"user_id":"u"}],"ttl_seconds":60,"send_at":"2026-12-03T08:00:00Z","priority":"normal"}`,
		` { "recipients" : [ ] , "channels" : [ "push" ] } `,
		`{"recipients":[{"user_id":"a"}],"recipients":[{"user_id":"b"}],"content":{"title":"x"},"content":{"body":"y"}}`,
		`{"Channels":["push"],"recipients":[{"user_id":"u"}]}`, // other keys keep encoding/json's matching without case
		`{"template":{"name":"welcome","data":{"n":[1,2,{"a":null}],"s":"x\\y\u00e9"}},"recipients":[{"user_id":"u"}]}`,
	}
	for _, doc := range flat {
		if !checkSendRequestLikeEncodingJSON(t, doc) {
			t.Errorf("not read flat: %s", doc)
		}
	}
	for _, doc := range []string{
		`{"recipients":[{"user_id":"u"}],"nope":1}`, `{"recipients":[{"user_id":"u","nope":1}]}`, `{"Recipients":[{"user_id":"u"}]}`,
		`{"recipients":null}`, `{"channels":["push"]}`, `{"recipients":[]} trailing`, `{"recipients":[{"user_id":"\u0041"}]}`,
		`{"content":{"title":},"recipients":[]}`, `{"content":{"title":"x"}}}`, `{"ttl_seconds":"60","recipients":[]}`,
		`{"content":{"title":"x","recipients":[]}`, `{"channels":["push"],"recipients":[],}`, `{"channels":["push]"],"recipients":[]}`,
		`{"channels":[1 2],"recipients":[]}`, `{"version":01,"recipients":[]}`, `{"channels":"push\` + "\n" + `","recipients":[]}`,
		``, `[]`, `{`, `{"recipients":[{"user_id":"u"}]`,
	} {
		checkSendRequestLikeEncodingJSON(t, doc)
	}
}

func FuzzDecodeSendRequest(f *testing.F) {
	for _, seed := range []string{`{"channels":["push"],"content":{"title":"Hi"},"recipients":[{"fcm_token":"t1"}]}`,
		`{"template":{"name":"w","data":{"a":[1,{"b":"c\"d"}]}},"recipients":[]}`, `{"recipients":[],"x":1}`, `{"ttl_seconds":5,"recipients":[{}]}`} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, doc string) { checkSendRequestLikeEncodingJSON(t, doc) })
}

func BenchmarkSendRequest10000(b *testing.B) {
	req := SendRequest{Channels: []Channel{ChannelPush}, Content: Content{Title: "Bench", Body: "pipeline"}, Category: CategoryMarketing}
	for i := range 10000 {
		req.Recipients = append(req.Recipients, Recipient{FCMToken: fmt.Sprintf("e2e-%07d-bench-token-padding-to-a-realistic-length", i)})
	}
	doc, _ := json.Marshal(req)
	b.Run("encoding-json", func(b *testing.B) {
		for b.Loop() {
			v := SendRequest{Recipients: RecipientsRoom(doc)}
			dec := json.NewDecoder(bytes.NewReader(doc))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&v); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("flat", func(b *testing.B) {
		for b.Loop() {
			v := SendRequest{Recipients: RecipientsRoom(doc)}
			if !ReadSendRequestFlat(doc, &v) {
				b.Fatal("not read")
			}
		}
	})
}
