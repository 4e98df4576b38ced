package sqlstore

import "encoding/json"

// DecodeHeaders decodes the headers column of an event. Most events
// have none ("{}"): they cost no decoding, which took a tenth of the
// relay's CPU in a drain when every row went through json.Unmarshal. It
// never fails: the claim has leased the event by then, and a row whose
// headers a plain-SQL producer wrote as something else than an object of
// strings ({"retries": 1}) must still be delivered, not fail every claim
// it is in. Values that are not strings are sent as their JSON text;
// headers that are not an object are dropped.
func DecodeHeaders(raw []byte) map[string]string {
	switch string(raw) {
	case "", "{}", "null":
		return nil
	}
	var h map[string]string
	if json.Unmarshal(raw, &h) == nil {
		return h
	}
	var loose map[string]json.RawMessage
	if json.Unmarshal(raw, &loose) != nil {
		return nil
	}
	h = make(map[string]string, len(loose))
	for name, value := range loose {
		var text string
		if json.Unmarshal(value, &text) != nil {
			text = string(value)
		}
		h[name] = text
	}
	return h
}
