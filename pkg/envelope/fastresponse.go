package envelope

import (
	"bytes"
	"slices"
	"strconv"
)

// decodeFastResponse decodes a route_response.v1 in one pass, as
// json.Unmarshal would decode it into r, and reports whether it could be sure
// of that: every key is a field of the type, spelled as its tag, at most
// once per object, and every value of its field's type (no null). Anything
// else is false, and left to json.Unmarshal. Every butler decodes one answer
// per notify, and reflection made that a tenth of the route row's client.
func decodeFastResponse(data []byte, r *RouteResponse) bool {
	d := fastDecoder{data: data}
	if !d.members(func(key []byte) bool {
		switch string(key) {
		case "schema_version":
			return d.strTo(&r.SchemaVersion)
		case "request_context":
			return d.requestRef(&r.RequestContext)
		case "status":
			return d.strTo(&r.Status)
		case "result":
			r.Result = new(RouteResult)
			return d.members(func(key []byte) bool {
				if string(key) != "notify_response" {
					return false
				}
				r.Result.NotifyResponse = new(NotifyResponse)
				return d.notifyResponse(r.Result.NotifyResponse)
			})
		case "error":
			r.Error = new(ErrorBody)
			return d.errorBody(r.Error)
		case "timing":
			r.Timing = new(Timing)
			return d.members(func(key []byte) bool {
				return string(key) == "duration_ms" && d.number(&r.Timing.DurationMS)
			})
		}
		return false
	}) {
		return false
	}
	d.space()
	return d.i == len(d.data)
}

func (d *fastDecoder) notifyResponse(n *NotifyResponse) bool {
	return d.members(func(key []byte) bool {
		switch string(key) {
		case "schema_version":
			return d.strTo(&n.SchemaVersion)
		case "request_context":
			return d.requestRef(&n.RequestContext)
		case "status":
			return d.strTo(&n.Status)
		case "delivery":
			n.Delivery = new(DeliveryResult)
			dr := n.Delivery
			return d.members(func(key []byte) bool {
				switch string(key) {
				case "channel":
					return d.strTo(&dr.Channel)
				case "delivery_id":
					return d.strTo(&dr.DeliveryID)
				case "message_ids":
					return d.strings(&dr.MessageIDs)
				case "outcome":
					return d.strTo(&dr.Outcome)
				case "note":
					return d.strTo(&dr.Note)
				}
				return false
			})
		case "error":
			n.Error = new(ErrorBody)
			return d.errorBody(n.Error)
		}
		return false
	})
}

func (d *fastDecoder) requestRef(ref *RequestRef) bool {
	return d.members(func(key []byte) bool {
		return string(key) == "request_id" && d.strTo(&ref.RequestID)
	})
}

func (d *fastDecoder) errorBody(e *ErrorBody) bool {
	return d.members(func(key []byte) bool {
		switch string(key) {
		case "class":
			return d.strTo(&e.Class)
		case "message":
			return d.strTo(&e.Message)
		case "retryable":
			switch d.next() {
			case 't':
				e.Retryable = true
				return d.literal("true")
			case 'f':
				e.Retryable = false
				return d.literal("false")
			}
		}
		return false
	})
}

// members consumes an object, calling member for each key (spelled plainly:
// no escape, nothing beyond ASCII) with d at the key's value, which member
// consumes. A key met twice is refused (encoding/json would merge the two),
// and so is an object of more keys than any envelope has.
func (d *fastDecoder) members(member func(key []byte) bool) bool {
	if d.next() != '{' {
		return false
	}
	d.i++
	if d.next() == '}' {
		d.i++
		return true
	}
	var seen [16][]byte
	n := 0
	for {
		if d.next() != '"' {
			return false
		}
		key, plain, ok := d.rawString()
		if !ok || !plain || n == len(seen) {
			return false
		}
		if slices.ContainsFunc(seen[:n], func(k []byte) bool { return bytes.Equal(k, key) }) {
			return false
		}
		seen[n] = key
		n++
		if d.next() != ':' {
			return false
		}
		d.i++
		if !member(key) {
			return false
		}
		switch d.next() {
		case ',':
			d.i++
		case '}':
			d.i++
			return true
		default:
			return false
		}
	}
}

// elements consumes an array, calling element with d at each element, which
// element consumes, and returns how many there were.
func (d *fastDecoder) elements(element func() bool) (int, bool) {
	if d.next() != '[' {
		return 0, false
	}
	d.i++
	if d.next() == ']' {
		d.i++
		return 0, true
	}
	for n := 1; ; n++ {
		if !element() {
			return n, false
		}
		switch d.next() {
		case ',':
			d.i++
		case ']':
			d.i++
			return n, true
		default:
			return n, false
		}
	}
}

// strTo consumes a string value ("" too) into dst.
func (d *fastDecoder) strTo(dst *string) bool {
	if d.next() != '"' {
		return false
	}
	s, ok := d.anyStr()
	*dst = s
	return ok
}

// strings consumes an array of strings into dst; [] is an empty slice, not
// nil, as json.Unmarshal makes it.
func (d *fastDecoder) strings(dst *[]string) bool {
	*dst = []string{}
	_, ok := d.elements(func() bool {
		var s string
		if !d.strTo(&s) {
			return false
		}
		*dst = append(*dst, s)
		return true
	})
	return ok
}

// number consumes a JSON number into dst as encoding/json does
// (strconv.ParseFloat of the literal); one out of float64's range is false.
func (d *fastDecoder) number(dst *float64) bool {
	d.space()
	start := d.i
	digits := func() int {
		n := 0
		for d.i < len(d.data) && d.data[d.i] >= '0' && d.data[d.i] <= '9' {
			d.i++
			n++
		}
		return n
	}
	if d.i < len(d.data) && d.data[d.i] == '-' {
		d.i++
	}
	switch n := digits(); {
	case n == 0:
		return false
	case n > 1 && d.data[d.i-n] == '0':
		return false // a leading zero
	}
	if d.i < len(d.data) && d.data[d.i] == '.' {
		d.i++
		if digits() == 0 {
			return false
		}
	}
	if d.i < len(d.data) && (d.data[d.i] == 'e' || d.data[d.i] == 'E') {
		d.i++
		if d.i < len(d.data) && (d.data[d.i] == '+' || d.data[d.i] == '-') {
			d.i++
		}
		if digits() == 0 {
			return false
		}
	}
	f, err := strconv.ParseFloat(string(d.data[start:d.i]), 64)
	if err != nil {
		return false
	}
	*dst = f
	return true
}
