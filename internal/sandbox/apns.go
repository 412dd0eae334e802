package sandbox

import "net/http"

func (s *Server) apnsRoutes(mux *http.ServeMux) {}
