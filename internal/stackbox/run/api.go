package run

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"herald/internal/stackbox/iam"
)

// Route is an AWS::ApiGatewayV2::Route with its integration's function and its authorizer.
type Route struct {
	Method, Path string // "ANY", "/v1/{proxy+}"
	Key          string // the RouteKey
	AuthType     string // AWS_IAM, JWT, NONE
	Function     *Function
	JWT          *JWTConfig
}

// JWTConfig is a JWT authorizer's configuration.
type JWTConfig struct {
	Issuer    string
	Audiences []string
}

// API is the HTTP API of the template on 127.0.0.1.
type API struct {
	URL    string
	ID     string
	Routes []Route
	b      *Box
}

// startAPI serves the template's HTTP API (AWS::ApiGatewayV2::Api with ProtocolType HTTP; the
// box runs one) with its routes. A WebSocket API (the live inbox stream) is not served: its
// functions are tested on their own (functions/rie_test.go, internal/awsenv).
func (b *Box) startAPI() error {
	var apis []string
	for _, id := range b.Template.LogicalIDs("AWS::ApiGatewayV2::Api") {
		p, err := b.props(id)
		if err != nil {
			return err
		}
		if str(p["ProtocolType"]) == "HTTP" {
			apis = append(apis, id)
		}
	}
	if len(apis) == 0 {
		return nil
	}
	if len(apis) > 1 {
		return fmt.Errorf("the box serves one HTTP API; the template has %d", len(apis))
	}
	a := &API{ID: b.Resolver.Resources[apis[0]].Ref, b: b}
	for _, id := range b.Template.LogicalIDs("AWS::ApiGatewayV2::Route") {
		p, err := b.props(id)
		if err != nil {
			return err
		}
		if str(p["ApiId"]) != a.ID {
			continue // a route of the WebSocket API
		}
		key := str(p["RouteKey"])
		method, path, ok := strings.Cut(key, " ")
		if !ok {
			return fmt.Errorf("route %s: RouteKey %q (only METHOD /path routes are served)", id, key)
		}
		r := Route{Method: method, Path: path, Key: key, AuthType: str(p["AuthorizationType"])}
		if r.AuthType == "" {
			r.AuthType = "NONE"
		}
		integ := strings.TrimPrefix(str(p["Target"]), "integrations/")
		for _, iid := range b.Template.LogicalIDs("AWS::ApiGatewayV2::Integration") {
			if b.Resolver.Resources[iid].Ref != integ {
				continue
			}
			ip, err := b.props(iid)
			if err != nil {
				return err
			}
			if str(ip["IntegrationType"]) != "AWS_PROXY" || str(ip["PayloadFormatVersion"]) != "2.0" {
				return fmt.Errorf("integration %s: only AWS_PROXY with payload format 2.0 is served", iid)
			}
			f, ok := b.FunctionByARN(str(ip["IntegrationUri"]))
			if !ok {
				return fmt.Errorf("integration %s: %s is not a function of the template", iid, str(ip["IntegrationUri"]))
			}
			r.Function = f
		}
		if r.Function == nil {
			return fmt.Errorf("route %s: target %q is not an integration of the template", id, str(p["Target"]))
		}
		if r.AuthType == "JWT" {
			for _, aid := range b.Template.LogicalIDs("AWS::ApiGatewayV2::Authorizer") {
				if b.Resolver.Resources[aid].Ref != str(p["AuthorizerId"]) {
					continue
				}
				ap, err := b.props(aid)
				if err != nil {
					return err
				}
				jc, _ := ap["JwtConfiguration"].(map[string]any)
				r.JWT = &JWTConfig{Issuer: str(jc["Issuer"])}
				if aud, ok := jc["Audience"].([]any); ok {
					for _, x := range aud {
						r.JWT.Audiences = append(r.JWT.Audiences, str(x))
					}
				}
			}
			if r.JWT == nil {
				return fmt.Errorf("route %s: JWT authorizer %s is not in the template", id, str(p["AuthorizerId"]))
			}
		}
		a.Routes = append(a.Routes, r)
	}
	sortRoutes(a.Routes)
	u, err := b.listen(a)
	if err != nil {
		return err
	}
	a.URL = u
	b.API = a
	return nil
}

// sortRoutes orders routes as API Gateway prefers them: more literal segments first, greedy
// paths last, a method before ANY.
func sortRoutes(rs []Route) {
	sort.SliceStable(rs, func(i, j int) bool { return specificity(rs[i]) > specificity(rs[j]) })
}

func specificity(r Route) int {
	s := 0
	for _, seg := range strings.Split(strings.Trim(r.Path, "/"), "/") {
		switch {
		case strings.HasSuffix(seg, "+}"):
			s += 0
		case strings.HasPrefix(seg, "{"):
			s += 10
		default:
			s += 100
		}
	}
	s = s*10 + len(strings.Split(r.Path, "/"))
	if r.Method != "ANY" {
		s++
	}
	return s
}

// match returns the route for a request and its path parameters.
func (a *API) match(method, path string) (*Route, map[string]string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i := range a.Routes {
		r := &a.Routes[i]
		if r.Method != "ANY" && r.Method != method {
			continue
		}
		params := map[string]string{}
		pat := strings.Split(strings.Trim(r.Path, "/"), "/")
		ok := true
		for k, p := range pat {
			if strings.HasSuffix(p, "+}") {
				if k >= len(segs) {
					ok = false
					break
				}
				params[strings.TrimSuffix(strings.TrimPrefix(p, "{"), "+}")] = strings.Join(segs[k:], "/")
				pat = pat[:k+1]
				segs = append(segs[:k:k], "")
				break
			}
			if k >= len(segs) {
				ok = false
				break
			}
			if strings.HasPrefix(p, "{") {
				params[strings.Trim(p, "{}")] = segs[k]
			} else if p != segs[k] {
				ok = false
				break
			}
		}
		if ok && len(pat) == len(segs) {
			return r, params
		}
		segs = strings.Split(strings.Trim(path, "/"), "/")
	}
	return nil, nil
}

func gatewayJSON(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": msg})
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b := a.b
	route, params := a.match(r.Method, r.URL.Path)
	if route == nil {
		gatewayJSON(w, http.StatusNotFound, "Not Found")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 10<<20))
	if err != nil {
		gatewayJSON(w, http.StatusBadRequest, "Bad Request")
		return
	}
	now := time.Now()
	reqID := fmt.Sprintf("stackbox-%d", now.UnixNano())
	rc := events.APIGatewayV2HTTPRequestContext{
		RouteKey: route.Key, AccountID: AccountID, Stage: "$default", RequestID: reqID, APIID: a.ID,
		DomainName: r.Host, DomainPrefix: a.ID, Time: now.UTC().Format("02/Jan/2006:15:04:05 +0000"), TimeEpoch: now.UnixMilli(),
		HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: r.Method, Path: r.URL.Path, Protocol: r.Proto,
			SourceIP: strings.Split(r.RemoteAddr, ":")[0], UserAgent: r.UserAgent()},
	}
	switch route.AuthType {
	case "AWS_IAM":
		m := sigv4AKID.FindStringSubmatch(r.Header.Get("Authorization"))
		principal := ""
		if m != nil {
			principal = b.principalOf(m[1])
		}
		if principal == "" {
			gatewayJSON(w, http.StatusForbidden, "Forbidden")
			return
		}
		res := fmt.Sprintf("arn:aws:execute-api:%s:%s:%s/$default/%s%s", Region, AccountID, a.ID, r.Method, r.URL.Path)
		if c := b.recorder.check(b.callerName(principal), iam.Request{Principal: principal, Action: "execute-api:Invoke", Resource: res}); !c.Allowed {
			gatewayJSON(w, http.StatusForbidden, "Forbidden")
			return
		}
		rc.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
			AccessKey: m[1], AccountID: arnAccountOf(principal), CallerID: "AROASTACKBOX:stackbox", UserARN: sessionARN(principal), UserID: "AROASTACKBOX:stackbox",
		}}
	case "JWT":
		claims, err := route.JWT.verify(r.Header.Get("Authorization"), now)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			gatewayJSON(w, http.StatusUnauthorized, "Unauthorized")
			return
		}
		rc.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims}}
	}
	// API Gateway's own permission to invoke the function (AWS::Lambda::Permission).
	source := fmt.Sprintf("arn:aws:execute-api:%s:%s:%s/$default/%s%s", Region, AccountID, a.ID, r.Method, route.Path)
	if c := b.recorder.check("apigateway", iam.Request{Principal: "apigateway.amazonaws.com", Action: "lambda:InvokeFunction", Resource: route.Function.ARN,
		Context: map[string]string{"aws:SourceArn": source, "aws:SourceAccount": AccountID}}); !c.Allowed {
		gatewayJSON(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	ev := events.APIGatewayV2HTTPRequest{
		Version: "2.0", RouteKey: route.Key, RawPath: r.URL.Path, RawQueryString: r.URL.RawQuery,
		Headers: map[string]string{}, PathParameters: params, RequestContext: rc,
	}
	for k, v := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			for _, c := range v {
				ev.Cookies = append(ev.Cookies, strings.Split(c, "; ")...)
			}
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev.Headers["host"] = r.Host
	if q := r.URL.Query(); len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		for k, v := range q {
			ev.QueryStringParameters[k] = strings.Join(v, ",")
		}
	}
	if len(params) == 0 {
		ev.PathParameters = nil
	}
	if len(body) > 0 {
		if isText(r.Header.Get("Content-Type"), body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	out, err := route.Function.Invoke(r.Context(), ev)
	if err != nil {
		b.log.Warn("stackbox: API integration failed", "route", route.Key, "error", err)
		gatewayJSON(w, http.StatusInternalServerError, "Internal Server Error")
		return
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil || resp.StatusCode == 0 {
		// Payload 2.0 without a statusCode: the response is the body, 200.
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for k, vs := range resp.MultiValueHeaders {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	w.WriteHeader(resp.StatusCode)
	if resp.IsBase64Encoded {
		raw, _ := base64.StdEncoding.DecodeString(resp.Body)
		_, _ = w.Write(raw)
		return
	}
	_, _ = io.WriteString(w, resp.Body)
}

func isText(ct string, body []byte) bool {
	ct = strings.ToLower(ct)
	return ct == "" || strings.HasPrefix(ct, "text/") || strings.Contains(ct, "json") || strings.Contains(ct, "xml") ||
		strings.Contains(ct, "x-www-form-urlencoded") || !slices.Contains(body, 0)
}

// verify checks a bearer JWT's iss, aud and exp as API Gateway's JWT authorizer does (the
// signature is not verified: the box has no identity provider) and returns its claims.
func (j *JWTConfig) verify(header string, now time.Time) (map[string]string, error) {
	tok := strings.TrimSpace(strings.TrimPrefix(header, "Bearer "))
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return nil, fmt.Errorf("not a JWT")
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(raw, &claims); err != nil {
		return nil, err
	}
	if str(claims["iss"]) != j.Issuer {
		return nil, fmt.Errorf("issuer %q", claims["iss"])
	}
	aud := []string{str(claims["aud"])}
	if list, ok := claims["aud"].([]any); ok {
		aud = nil
		for _, x := range list {
			aud = append(aud, str(x))
		}
	}
	if cid := str(claims["client_id"]); cid != "" {
		aud = append(aud, cid)
	}
	if !slices.ContainsFunc(aud, func(a string) bool { return slices.Contains(j.Audiences, a) }) {
		return nil, fmt.Errorf("audience %v", aud)
	}
	if exp, ok := claims["exp"].(float64); !ok || now.Unix() >= int64(exp) {
		return nil, fmt.Errorf("expired")
	}
	out := map[string]string{}
	for k, v := range claims {
		if s, ok := v.(string); ok {
			out[k] = s
		} else {
			b, _ := json.Marshal(v)
			out[k] = string(b)
		}
	}
	return out, nil
}

// Token makes an unsigned JWT for the API's JWT routes with the given subject.
func (a *API) Token(sub string, ttl time.Duration) string {
	return a.TokenWith(sub, nil, ttl)
}

// TokenWith is Token with more claims (an operator's groups, say).
func (a *API) TokenWith(sub string, extra map[string]any, ttl time.Duration) string {
	var j *JWTConfig
	for _, r := range a.Routes {
		if r.JWT != nil {
			j = r.JWT
		}
	}
	if j == nil {
		return ""
	}
	enc := func(v any) string { b, _ := json.Marshal(v); return base64.RawURLEncoding.EncodeToString(b) }
	aud := ""
	if len(j.Audiences) > 0 {
		aud = j.Audiences[0]
	}
	claims := map[string]any{"iss": j.Issuer, "aud": aud, "sub": sub, "exp": time.Now().Add(ttl).Unix()}
	for k, v := range extra {
		claims[k] = v
	}
	return enc(map[string]string{"alg": "none", "typ": "JWT"}) + "." + enc(claims) + ".stackbox"
}

func arnAccountOf(arn string) string {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) < 5 {
		return ""
	}
	return parts[4]
}

// sessionARN is the caller ARN API Gateway reports for a role: its assumed-role session.
func sessionARN(principal string) string {
	parts := strings.SplitN(principal, ":", 6)
	if len(parts) == 6 && parts[2] == "iam" && strings.HasPrefix(parts[5], "role/") {
		name := parts[5][strings.LastIndexByte(parts[5], '/')+1:]
		return fmt.Sprintf("arn:%s:sts::%s:assumed-role/%s/stackbox", parts[1], parts[4], name)
	}
	return principal
}
