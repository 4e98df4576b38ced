package console

import "net/http"

// endpointPageRoutes adds the endpoint pages' routes, under /endpoints.
func (c *Console) endpointPageRoutes(mux *http.ServeMux) {}
