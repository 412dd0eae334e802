package sandbox

import "net/http"

func (s *Server) fcmRoutes(mux *http.ServeMux) {}
