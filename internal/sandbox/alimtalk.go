package sandbox

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The AlimTalk fake speaks Solapi's POST /messages/v4/send-many/detail for ATA (AlimTalk)
// messages: the HMAC Authorization header checked as Solapi checks it (known API key, date
// within 15 minutes, signature of date+salt under the key's secret, no signature used twice),
// 400 {"errorCode": "ValidationError"} for a malformed request, per-message refusals in
// failedMessageList with Solapi's status codes, and accepted messages in messageList.
//
// Solapi learns Kakao's verdict on a recipient (3104 not a KakaoTalk user, 3107 blocked)
// after it answered, and reports it later in its message list (GET /messages/v4/list); what it
// refuses at send time is the request's own fault (1xxx: a template id it does not know, 1042,
// text that differs from the template, 1043). The fake does the same: numbers ending 0001 or
// 0011 and 0002 or 0012 are accepted (2000) in messageList, reported still pending (3000) in the
// list's first report, and 3104 / 3107 from the second on; 0010 is delivered late the same way
// (4000 from the second report). Every other accepted message is reported delivered (4000) from
// the first report. The list takes
// messageIds (repeated, as Solapi's SDKs send it), messageId, groupId, to, type, and
// startDate/endDate (ISO 8601, on dateCreated) as Solapi's SDKs send them, or the documented
// criteria=messageId|groupId|to|type&cond=eq&value=…; limit (default 20) and startKey page it in
// message id order, and each entry carries the customFields its send had.

const alimtalkSkew = 15 * time.Minute

var (
	alimtalkAuthRe   = regexp.MustCompile(`^(HMAC-SHA256|HMAC-MD5) apiKey=([^,\s]+), date=([^,\s]+), salt=([^,\s]+), signature=([0-9a-fA-F]+)$`)
	alimtalkMobileRe = regexp.MustCompile(`^01[016789][1-9][0-9]{6,7}$`)
	alimtalkVarRe    = regexp.MustCompile(`^#\{[^\s.{}#]+\}$`)
	alimtalkRetryRe  = regexp.MustCompile(`^0105555(429|503)([1-9])$`)
	alimtalkButtons  = map[string]bool{"WL": true, "AL": true, "DS": true, "BK": true, "MD": true, "BC": true, "BT": true, "AC": true}
)

// TrustAlimTalkKey makes the fake Solapi accept requests signed with apiSecret under apiKey,
// as Solapi knows the keys issued on its console.
func (s *Server) TrustAlimTalkKey(apiKey, apiSecret string) {
	s.alimtalkMu.Lock()
	defer s.alimtalkMu.Unlock()
	s.alimtalkKeys[apiKey] = apiSecret
}

func (s *Server) alimtalkRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /messages/v4/send-many/detail", s.handleAlimTalkSend)
	mux.HandleFunc("GET /messages/v4/list", s.handleAlimTalkList)
}

// alimtalkStored is an accepted message as the message list reports it.
type alimtalkStored struct {
	st      alimtalkStatus
	groupID string
	created time.Time
	final   string // the status code reported once the verdict is in
	late    bool   // the first report is still pending (3000)
	reports int    // how many list answers included it
}

// alimtalkLate is the verdict a number gets late: "" when it gets it at once.
func alimtalkLate(to string) string {
	switch {
	case strings.HasSuffix(to, "0010"):
		return "4000"
	case strings.HasSuffix(to, "0001"), strings.HasSuffix(to, "0011"):
		return "3104"
	case strings.HasSuffix(to, "0002"), strings.HasSuffix(to, "0012"):
		return "3107"
	}
	return ""
}

var alimtalkStatusText = map[string]string{
	"3000": "이통사로 접수 (결과 수신 대기)",
	"4000": "수신완료",
	"3104": "카카오톡 미사용자",
	"3107": "72시간 이내 카카오톡 미사용자, 알림톡 차단한 사용자",
}

func (s *Server) handleAlimTalkList(w http.ResponseWriter, req *http.Request) {
	if code, msg := s.alimtalkAuth(req.Header.Get("Authorization"), time.Now()); code != "" {
		alimtalkError(w, http.StatusForbidden, code, msg)
		return
	}
	q := req.URL.Query()
	ids := q["messageIds"]
	ids = append(ids, q["messageIds[]"]...)
	if id := q.Get("messageId"); id != "" {
		ids = append(ids, id)
	}
	group := q.Get("groupId")
	to, typ := q.Get("to"), strings.ToUpper(q.Get("type"))
	if c := q.Get("criteria"); c != "" {
		crit, conds, vals := strings.Split(c, ","), strings.Split(q.Get("cond"), ","), strings.Split(q.Get("value"), ",")
		if len(conds) != len(crit) || len(vals) != len(crit) {
			alimtalkError(w, http.StatusBadRequest, "ValidationError", "criteria, cond, value의 개수가 일치하지 않습니다")
			return
		}
		for i, k := range crit {
			if conds[i] != "eq" {
				alimtalkError(w, http.StatusBadRequest, "ValidationError", "이 샌드박스는 cond=eq만 지원합니다")
				return
			}
			switch k {
			case "messageId":
				ids = append(ids, vals[i])
			case "groupId":
				group = vals[i]
			case "to":
				to = vals[i]
			case "type":
				typ = strings.ToUpper(vals[i])
			default:
				alimtalkError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("이 샌드박스는 criteria %q를 지원하지 않습니다", k))
				return
			}
		}
	}
	// startDate and endDate bound dateCreated (dateType CREATED, the default) or dateUpdated.
	var from, until time.Time
	for _, d := range []struct {
		name string
		t    *time.Time
	}{{"startDate", &from}, {"endDate", &until}} {
		if v := q.Get(d.name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				alimtalkError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf("%q must be an ISO 8601 date", d.name))
				return
			}
			*d.t = t
		}
	}
	if dt := q.Get("dateType"); dt != "" && dt != "CREATED" && dt != "UPDATED" {
		alimtalkError(w, http.StatusBadRequest, "ValidationError", `"dateType" must be one of CREATED, UPDATED`)
		return
	}
	match := func(m *alimtalkStored) bool {
		return (group == "" || m.groupID == group) && (to == "" || m.st.To == to) && (typ == "" || m.st.Type == typ) &&
			(from.IsZero() || !m.created.Before(from)) && (until.IsZero() || !m.created.After(until))
	}
	limit := 20
	if l := q.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 500 {
			alimtalkError(w, http.StatusBadRequest, "ValidationError", `"limit" must be a number from 1 to 500`)
			return
		}
		limit = n
	}
	s.alimtalkMu.Lock()
	var picked []*alimtalkStored
	if len(ids) > 0 {
		seen := map[string]bool{}
		for _, id := range ids {
			if m, ok := s.alimtalkMsgs[id]; ok && !seen[id] && match(m) {
				seen[id] = true
				picked = append(picked, m)
			}
		}
	} else {
		for _, m := range s.alimtalkMsgs {
			if match(m) {
				picked = append(picked, m)
			}
		}
	}
	slices.SortFunc(picked, func(a, b *alimtalkStored) int { return strings.Compare(a.st.MessageID, b.st.MessageID) })
	// Pages are in message id order; startKey is the first id of the page (a nextKey given back).
	if key := q.Get("startKey"); key != "" {
		i, _ := slices.BinarySearchFunc(picked, key, func(m *alimtalkStored, k string) int { return strings.Compare(m.st.MessageID, k) })
		picked = picked[i:]
	}
	var next any
	if len(picked) > limit {
		next = picked[limit].st.MessageID
		picked = picked[:limit]
	}
	list := make(map[string]any, len(picked))
	for _, m := range picked {
		m.reports++
		code := m.final
		if m.late && m.reports == 1 {
			code = "3000"
		}
		var reason any
		if code != "4000" && code != "3000" {
			reason = alimtalkStatusText[code]
		}
		list[m.st.MessageID] = map[string]any{
			"_id": m.st.MessageID, "messageId": m.st.MessageID, "groupId": m.groupID, "accountId": alimtalkAccount,
			"type": "ATA", "country": "82", "to": m.st.To, "from": m.st.From, "statusCode": code,
			"statusMessage": alimtalkStatusText[code], "reason": reason, "customFields": m.st.CustomFields,
			"dateCreated": m.created.Format(time.RFC3339Nano), "dateUpdated": time.Now().UTC().Format(time.RFC3339Nano),
		}
	}
	s.alimtalkMu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(map[string]any{"startKey": q.Get("startKey"), "nextKey": next, "limit": limit, "messageList": list})
}

type alimtalkButton struct {
	ButtonName string `json:"buttonName"`
	ButtonType string `json:"buttonType"`
	LinkMo     string `json:"linkMo"`
	LinkPc     string `json:"linkPc"`
	LinkAnd    string `json:"linkAnd"`
	LinkIos    string `json:"linkIos"`
}

type alimtalkMessage struct {
	To           string            `json:"to"`
	From         string            `json:"from"`
	Type         string            `json:"type"`
	Text         string            `json:"text"`
	CustomFields map[string]string `json:"customFields"`
	KakaoOptions *struct {
		PfID       string            `json:"pfId"`
		TemplateID string            `json:"templateId"`
		Variables  map[string]string `json:"variables"`
		DisableSms bool              `json:"disableSms"`
		Buttons    []alimtalkButton  `json:"buttons"`
	} `json:"kakaoOptions"`
}

// alimtalkStatus is one entry of failedMessageList or messageList.
type alimtalkStatus struct {
	To            string            `json:"to,omitempty"`
	From          string            `json:"from,omitempty"`
	Type          string            `json:"type,omitempty"`
	Country       string            `json:"country,omitempty"`
	MessageID     string            `json:"messageId"`
	StatusCode    string            `json:"statusCode"`
	StatusMessage string            `json:"statusMessage"`
	AccountID     string            `json:"accountId,omitempty"`
	CustomFields  map[string]string `json:"customFields,omitempty"`
}

const alimtalkAccount = "12925149" // the fake's account id

func (s *Server) handleAlimTalkSend(w http.ResponseWriter, req *http.Request) {
	if s.refused("alimtalk", w) {
		return
	}
	if code, msg := s.alimtalkAuth(req.Header.Get("Authorization"), time.Now()); code != "" {
		alimtalkError(w, http.StatusForbidden, code, msg)
		return
	}
	var body struct {
		Messages        []json.RawMessage `json:"messages"`
		ShowMessageList bool              `json:"showMessageList"`
		AllowDuplicates bool              `json:"allowDuplicates"`
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, req.Body, 16<<20))
	if err := dec.Decode(&body); err != nil {
		alimtalkError(w, http.StatusBadRequest, "ValidationError", "요청 본문이 올바른 JSON이 아닙니다: "+err.Error())
		return
	}
	switch {
	case body.Messages == nil:
		alimtalkError(w, http.StatusBadRequest, "ValidationError", `"messages" is required`)
		return
	case len(body.Messages) == 0:
		alimtalkError(w, http.StatusBadRequest, "ValidationError", `"messages" must contain at least 1 items`)
		return
	case len(body.Messages) > 10000:
		alimtalkError(w, http.StatusBadRequest, "ValidationError", `"messages" must contain less than or equal to 10000 items`)
		return
	}
	msgs := make([]alimtalkMessage, len(body.Messages))
	for i, raw := range body.Messages {
		dec := json.NewDecoder(strings.NewReader(string(raw)))
		dec.DisallowUnknownFields() // a misspelt field is a request the real API would not read as meant
		if err := dec.Decode(&msgs[i]); err != nil {
			alimtalkError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf(`"messages[%d]": %v`, i, err))
			return
		}
		// Solapi sends nothing without the sender number (발신번호), written in digits.
		if f := msgs[i].From; f == "" || strings.Trim(f, "0123456789") != "" {
			alimtalkError(w, http.StatusBadRequest, "ValidationError", fmt.Sprintf(`"messages[%d].from": a registered sender number in digits is required`, i))
			return
		}
	}
	// Throttling and outages answer the whole request, as the real service does.
	for _, m := range msgs {
		if kind, fail := s.alimtalkTransient(m); fail && kind == "throttle" {
			w.Header().Set("Retry-After", "1")
			alimtalkError(w, http.StatusTooManyRequests, "TooManyRequests", "요청이 너무 많습니다. 잠시 후 다시 시도해 주세요.")
			return
		} else if fail {
			alimtalkError(w, http.StatusServiceUnavailable, "ServiceUnavailable", "서비스를 일시적으로 사용할 수 없습니다.")
			return
		}
	}

	now := time.Now().UTC()
	groupID := solapiID("G4V", now)
	failed, accepted := []alimtalkStatus{}, []alimtalkStatus{}
	seen := map[string]bool{}
	for _, m := range msgs {
		id := solapiID("M4V", now)
		code, text := s.alimtalkVerdict(m)
		if code == "2000" && seen[m.To] && !body.AllowDuplicates {
			code, text = "1026", "중복 수신번호"
		}
		st := alimtalkStatus{MessageID: id, StatusCode: code, StatusMessage: text, CustomFields: m.CustomFields}
		if code != "2000" {
			st.To, st.From, st.Type, st.Country, st.AccountID = m.To, m.From, strings.ToUpper(m.Type), "82", alimtalkAccount
			failed = append(failed, st)
			continue
		}
		seen[m.To] = true
		ko := m.KakaoOptions
		data := map[string]string{"template_id": ko.TemplateID, "pf_id": ko.PfID, "buttons": strconv.Itoa(len(ko.Buttons))}
		for k, v := range ko.Variables {
			data[k] = v
		}
		for k, v := range m.CustomFields {
			data["custom."+k] = v
		}
		final, late := "4000", false
		if v := alimtalkLate(m.To); v != "" {
			final, late = v, true
			data["late_verdict"] = v
		}
		if err := s.Recorder.Add(Delivery{Provider: "alimtalk", Address: m.To, App: ko.PfID, Data: data, MessageID: id, At: now}); err != nil {
			s.log.Error("alimtalk record", "err", err)
			alimtalkError(w, http.StatusInternalServerError, "InternalError", "서버 오류")
			return
		}
		accepted = append(accepted, st)
		stored := st
		stored.To, stored.From, stored.Type, stored.Country, stored.AccountID = m.To, m.From, "ATA", "82", alimtalkAccount
		s.alimtalkMu.Lock()
		s.alimtalkMsgs[id] = &alimtalkStored{st: stored, groupID: groupID, created: now, final: final, late: late}
		s.alimtalkMu.Unlock()
	}
	// An answer lost on its way back: the messages are accepted and stored, and the connection
	// is dropped before a byte of the answer is written.
	for _, m := range msgs {
		if s.alimtalkLost(m) {
			panic(http.ErrAbortHandler)
		}
	}
	resp := map[string]any{
		"groupInfo": map[string]any{
			"groupId": groupID, "_id": groupID, "accountId": alimtalkAccount, "apiVersion": "4",
			"status": "SENDING", "serviceMethod": "MT", "strict": false, "allowDuplicates": body.AllowDuplicates,
			"count": map[string]int{
				"total": len(msgs), "sentTotal": 0, "sentFailed": 0, "sentSuccess": 0, "sentPending": 0,
				"sentReplacement": 0, "refund": 0, "registeredFailed": len(failed), "registeredSuccess": len(accepted),
			},
			"countForCharge": map[string]any{"ata": map[string]int{"82": len(accepted)}},
			"dateCreated":    now.Format(time.RFC3339Nano), "dateUpdated": now.Format(time.RFC3339Nano), "dateSent": now.Format(time.RFC3339Nano),
		},
		"failedMessageList": failed,
	}
	if body.ShowMessageList {
		resp["messageList"] = accepted
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_ = json.NewEncoder(w).Encode(resp)
}

// alimtalkAuth checks the Authorization header; it returns Solapi's error code and message, or
// "" when the request is authenticated.
func (s *Server) alimtalkAuth(header string, now time.Time) (code, message string) {
	m := alimtalkAuthRe.FindStringSubmatch(header)
	if m == nil {
		return "InvalidAPIKey", "Authorization 헤더가 없거나 형식이 올바르지 않습니다 (HMAC-SHA256 apiKey=…, date=…, salt=…, signature=…)"
	}
	method, key, date, salt, sig := m[1], m[2], m[3], m[4], strings.ToLower(m[5])
	s.alimtalkMu.Lock()
	secret, ok := s.alimtalkKeys[key]
	s.alimtalkMu.Unlock()
	if !ok {
		return "InvalidAPIKey", "유효한 API Key가 아닙니다"
	}
	at, err := time.Parse(time.RFC3339Nano, date)
	if err != nil {
		return "RequestTimeTooSkewed", "date는 ISO 8601 형식이어야 합니다"
	}
	if d := now.Sub(at); d > alimtalkSkew || d < -alimtalkSkew {
		return "RequestTimeTooSkewed", "시간 값이 서버 시간을 15분 이상 벗어났습니다"
	}
	if len(salt) < 12 || len(salt) > 64 {
		return "SignatureDoesNotMatch", "salt는 12~64바이트여야 합니다"
	}
	var h func() hash.Hash = sha256.New
	if method == "HMAC-MD5" {
		h = md5.New
	}
	mac := hmac.New(h, []byte(secret))
	mac.Write([]byte(date + salt))
	if !hmac.Equal([]byte(hex.EncodeToString(mac.Sum(nil))), []byte(sig)) {
		return "SignatureDoesNotMatch", "생성한 Signature가 일치하지 않습니다"
	}
	s.alimtalkMu.Lock()
	defer s.alimtalkMu.Unlock()
	for k, t := range s.alimtalkSigs { // forget what can no longer be replayed
		if now.Sub(t) > 2*alimtalkSkew {
			delete(s.alimtalkSigs, k)
		}
	}
	if _, used := s.alimtalkSigs[sig]; used {
		return "DuplicatedSignature", "15분 안에 동일한 signature 값이 사용되었습니다"
	}
	s.alimtalkSigs[sig] = now
	return "", ""
}

// alimtalkTransient decides the injected throttling and outages: phone 0105555429N is
// throttled (and 0105555503N unavailable) for its first N attempts, and a template code
// containing "throttle<N>" or "unavailable<N>" does the same for each recipient.
func (s *Server) alimtalkTransient(m alimtalkMessage) (kind string, fail bool) {
	if r := alimtalkRetryRe.FindStringSubmatch(m.To); r != nil {
		n, _ := strconv.Atoi(r[2])
		kind = map[string]string{"429": "throttle", "503": "unavailable"}[r[1]]
		return kind, s.attempt("alimtalk:"+m.To) <= n
	}
	if m.KakaoOptions != nil {
		if kind, fail := s.failNow("alimtalk:" + m.KakaoOptions.TemplateID + ":" + m.To); kind != "" {
			return kind, fail
		}
	}
	return "", false
}

// alimtalkLostRe is the lost-answer rule: a template code containing "lost<N>".
var alimtalkLostRe = regexp.MustCompile(`lost(\d+)`)

// alimtalkLost decides the injected lost answer: a template code containing "lost<N>" has each
// phone's first N sends accepted, and their answer lost.
func (s *Server) alimtalkLost(m alimtalkMessage) bool {
	if m.KakaoOptions == nil {
		return false
	}
	r := alimtalkLostRe.FindStringSubmatch(m.KakaoOptions.TemplateID)
	if r == nil {
		return false
	}
	n, _ := strconv.Atoi(r[1])
	return s.attempt("alimtalk:lost:"+m.KakaoOptions.TemplateID+":"+m.To) <= n
}

// alimtalkVerdict is Solapi's status code for one message: "2000" when accepted.
func (s *Server) alimtalkVerdict(m alimtalkMessage) (code, text string) {
	ko := m.KakaoOptions
	switch {
	case m.To == "":
		return "1010", "필수 입력 값 미입력: to"
	case m.Type != "" && !strings.EqualFold(m.Type, "ATA"):
		return "1025", "잘못된 메시지 타입 (이 샌드박스는 알림톡 ATA만 받습니다)"
	case ko == nil:
		return "1010", "필수 입력 값 미입력: kakaoOptions"
	case ko.PfID == "":
		return "1010", "필수 입력 값 미입력: kakaoOptions.pfId"
	case ko.TemplateID == "":
		return "1010", "필수 입력 값 미입력: kakaoOptions.templateId"
	case !alimtalkMobileRe.MatchString(m.To):
		return "1011", "Format Error: 수신번호 형식 오류"
	case len(m.CustomFields) > 0 && !validCustomFields(m.CustomFields):
		return "1032", "유효한 커스텀 필드 값이 아닙니다. 필드명은 30자 설정값은 100자까지 가능합니다."
	case len(ko.Buttons) > 5:
		return "1050", "버튼은 최대 5개까지 사용 가능합니다."
	case strings.Contains(ko.PfID, "invalid"):
		return "1041", "유효한 플러스 친구 값이 아닙니다."
	case utf8.RuneCountInString(m.Text) > 1000:
		return "1031", "ATA는 한/영포함 1000자까지 사용 가능 합니다."
	}
	for k := range ko.Variables {
		if !alimtalkVarRe.MatchString(k) {
			return "1011", fmt.Sprintf("Format Error: 변수명 %q는 #{변수명} 형식이어야 합니다", k)
		}
	}
	for _, b := range ko.Buttons {
		switch {
		case !alimtalkButtons[b.ButtonType] || b.ButtonName == "":
			return "1044", "유효한 버튼 값이 아닙니다."
		case utf8.RuneCountInString(b.ButtonName) > 14:
			return "1049", "버튼 명은 최대 14자까지 사용 가능합니다."
		case b.ButtonType == "WL" && b.LinkMo == "", b.ButtonType == "AL" && (b.LinkAnd == "" || b.LinkIos == ""):
			return "1045", "유효한 버튼 URL 값이 아닙니다."
		case len(b.LinkMo) > 100 || len(b.LinkPc) > 100:
			return "1048", "버튼 URL 값은 최대 100자까지 사용 가능합니다."
		}
	}
	switch {
	case strings.Contains(ko.TemplateID, "unregistered"):
		return "1042", "유효한 템플릿 아이디가 아닙니다."
	case strings.Contains(ko.TemplateID, "mismatch"):
		return "1043", "템플릿 내용과 메시지 내용이 일치하지 않습니다."
	}
	return "2000", "정상 접수(이통사로 접수 예정) "
}

func validCustomFields(f map[string]string) bool {
	for k, v := range f {
		if utf8.RuneCountInString(k) > 30 || utf8.RuneCountInString(v) > 100 {
			return false
		}
	}
	return true
}

func alimtalkError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"errorCode": code, "errorMessage": message})
}

// solapiID is an id in Solapi's shape: a prefix ("G4V" group, "M4V" message), the time in
// Korea, and 15 random upper-case letters and digits.
func solapiID(prefix string, now time.Time) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 15)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return prefix + now.In(time.FixedZone("KST", 9*3600)).Format("20060102150405") + string(b)
}
