package api

import "testing"

// TestJSONPathAt: invalid UTF-8 is reported under the field that holds it, a key's included.
func TestJSONPathAt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ raw, want string }{
		{"{\"content\": {\"title\": \"Hi \xff\"}}", "content.title"},
		{"{\"channels\": [\"push\"], \"recipients\": [{\"user_id\": \"a\"}, {\"user_id\": \"b\xfe\"}]}", "recipients[1].user_id"},
		{"{\"data\": {\"k\xff\": \"v\"}}", "data.k\ufffd"},
		{"{\"a\": [[1, 2], [\"x\", \"\xff\"]]}", "a[1][1]"},
		{"\"\xff\"", ""},
	} {
		at := invalidUTF8At([]byte(c.raw))
		if at == len(c.raw) {
			t.Fatalf("%q holds no invalid UTF-8", c.raw)
		}
		if got := jsonPathAt([]byte(c.raw), at); got != c.want {
			t.Errorf("jsonPathAt(%q, %d) = %q, want %q", c.raw, at, got, c.want)
		}
	}
}
