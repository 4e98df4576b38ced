package console

import "net/http"

// apiRoutes adds the JSON API's routes, under /api/ (see openapi.json).
func (c *Console) apiRoutes(mux *http.ServeMux) {}
