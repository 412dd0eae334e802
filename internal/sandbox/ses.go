package sandbox

import "net/http"

func (s *Server) sesRoutes(mux *http.ServeMux) {}
