package sandbox

import "net/http"

func (s *Server) twilioRoutes(mux *http.ServeMux) {}
