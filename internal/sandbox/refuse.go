package sandbox

import "net/http"

// RefuseCredentials makes the fake of provider (fcm, apns, ses, twilio, alimtalk) refuse every
// request from now on the way the real service refuses credentials it does not accept — FCM
// 401 UNAUTHENTICATED, APNs 403 InvalidProviderToken, SES 403 InvalidClientTokenId, Twilio 401
// code 20003, Solapi 403 InvalidAPIKey — so an operator's broken key can be tried end to end.
// Refused reports how many requests it refused so far.
func (s *Server) RefuseCredentials(provider string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse[provider] = true
}

// Refused is how many requests the fake of provider refused under RefuseCredentials.
func (s *Server) Refused(provider string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refusedN[provider]
}

// refused reports whether provider's fake refuses credentials now, and writes its refusal if so.
func (s *Server) refused(provider string, w http.ResponseWriter) bool {
	s.mu.Lock()
	on := s.refuse[provider]
	if on {
		s.refusedN[provider]++
	}
	s.mu.Unlock()
	if !on {
		return false
	}
	switch provider {
	case "fcm":
		writeFCMFailure(w, newFCMFailure(http.StatusUnauthorized, "UNAUTHENTICATED", "",
			"Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.", ""))
	case "apns":
		writeAPNsReason(w, newUUID(), http.StatusForbidden, "InvalidProviderToken")
	case "ses":
		sesError(w, http.StatusForbidden, "InvalidClientTokenId", "The security token included in the request is invalid.")
	case "twilio":
		w.Header().Set("WWW-Authenticate", `Basic realm="Twilio API"`)
		twilioError(w, http.StatusUnauthorized, 20003, "Authenticate")
	case "alimtalk":
		alimtalkError(w, http.StatusForbidden, "InvalidAPIKey", "유효한 API Key가 아닙니다")
	}
	return true
}
