package console

// APIRoutes are the JSON API's operations as apiTable registers them,
// "METHOD /api/path", for the test that holds them against openapi.json.
func APIRoutes() []string {
	out := make([]string, len(apiTable))
	for i, rt := range apiTable {
		out[i] = rt.method + " " + rt.path
	}
	return out
}
