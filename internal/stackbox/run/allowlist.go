package run

import (
	"bufio"
	"fmt"
	"io"
	"path"
	"strings"

	"herald/internal/stackbox/iam"
)

// The allowlist is the reviewed list of grants the box's scenarios do not exercise, each with
// why it is kept (infra/iam-allowlist.txt). A grant never used that no line explains is a grant
// too many, or a scenario missing.

// AllowEntry is one line of the allowlist: who (a pattern over the function name the summary
// names a role by, herald-<env>-<name>), which action (a pattern), on which resources (a pattern
// over the grant's resources, joined by ", "), and why; * matches any run of characters.
type AllowEntry struct {
	Line                       int
	Who, Action, Resource, Why string
}

// ParseAllowlist reads an allowlist: one entry a line, `who action resource -- why`; blank
// lines and lines starting with # are skipped. Every entry must give its reason.
func ParseAllowlist(r io.Reader) ([]AllowEntry, error) {
	var out []AllowEntry
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		grant, why, ok := strings.Cut(line, " -- ")
		fields := strings.Fields(grant)
		if !ok || strings.TrimSpace(why) == "" || len(fields) != 3 {
			return nil, fmt.Errorf("allowlist line %d: want `who action resource -- why`, got %q", n, line)
		}
		out = append(out, AllowEntry{Line: n, Who: fields[0], Action: fields[1], Resource: fields[2], Why: strings.TrimSpace(why)})
	}
	return out, sc.Err()
}

func (e AllowEntry) matches(who string, u iam.Unused) bool {
	return glob(e.Who, who) && glob(strings.ToLower(e.Action), strings.ToLower(u.Action)) && glob(e.Resource, strings.Join(u.Resources, ", "))
}

// glob matches s against pattern, where * is any run of characters (slashes included).
func glob(pattern, s string) bool {
	ok, _ := path.Match(strings.ReplaceAll(pattern, "/", "\x00"), strings.ReplaceAll(s, "/", "\x00"))
	return ok
}

// UnusedReport splits the grants never used (logs: and xray: aside, which Lambda and Step
// Functions use themselves) into those no allowlist entry explains and those it does, and
// returns the entries that explain nothing (stale: remove them).
func (b *Box) UnusedReport(allow []AllowEntry) (unexplained []iam.Unused, allowlisted int, stale []AllowEntry) {
	used := make([]bool, len(allow))
	for _, u := range b.UnusedGrants() {
		if strings.HasPrefix(u.Action, "logs:") || strings.HasPrefix(u.Action, "xray:") {
			continue
		}
		who := b.callerName(u.Principal)
		explained := false
		for i, e := range allow {
			if e.matches(who, u) {
				used[i], explained = true, true
			}
		}
		if explained {
			allowlisted++
		} else {
			unexplained = append(unexplained, u)
		}
	}
	for i, e := range allow {
		if !used[i] {
			stale = append(stale, e)
		}
	}
	return unexplained, allowlisted, stale
}
