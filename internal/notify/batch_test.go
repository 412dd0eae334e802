package notify

import "testing"

// SendBatchIn tells a batch from a single request, also one whose text says "notifications",
// and refuses a batch with a field it does not know.
func TestSendBatchIn(t *testing.T) {
	for _, c := range []struct {
		body      string
		ok, fails bool
		n         int
	}{
		{`{"notifications":[{},{}],"attributes":[{},{}]}`, true, false, 2},
		{`{"recipients":[{"user_id":"u"}],"content":{"body":"your \"notifications\" settings"}}`, false, false, 0},
		{`{"recipients":[]}`, false, false, 0},
		{`not json "notifications"`, false, false, 0},
		{`{"notifications":[{}],"extra":1}`, true, true, 0},
	} {
		b, ok, err := SendBatchIn([]byte(c.body))
		if ok != c.ok || (err != nil) != c.fails || (err == nil && ok && len(b.Notifications) != c.n) {
			t.Errorf("SendBatchIn(%s) = %+v, %v, %v; want ok %v, failing %v, %d requests", c.body, b, ok, err, c.ok, c.fails, c.n)
		}
	}
}
