package webhooktest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
)

// fileEntry is what a multipart webhook's payload says of one file part.
type fileEntry struct {
	Name      string `json:"name"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type"`
	SHA256    string `json:"sha256"`
	Part      string `json:"part"`
}

// decode reads a body of Content-Type contentType: its JSON object, its
// files, or what is wrong with it ("" when nothing is, or when the type
// is neither JSON nor multipart, which the server refuses on its own).
func decode(contentType string, body []byte) (map[string]any, []File, string) {
	mt, params, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
		return nil, nil, ""
	case mt == "multipart/form-data":
		payload, files, err := readMultipart(body, params["boundary"])
		if err != nil {
			return payload, nil, err.Error()
		}
		return payload, files, ""
	}
	var payload map[string]any
	if json.Unmarshal(body, &payload) != nil || payload == nil {
		return nil, nil, "the body is not a JSON object"
	}
	return payload, nil, ""
}

// readMultipart reads a multipart webhook as a careful receiver does: the
// part "payload" first, a JSON object, then exactly the file parts its
// files list names, each with the filename, size and sha256 given there.
func readMultipart(body []byte, boundary string) (map[string]any, []File, error) {
	if boundary == "" {
		return nil, nil, errors.New("the multipart Content-Type has no boundary")
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	first, err := mr.NextPart()
	if err != nil {
		return nil, nil, fmt.Errorf("the body is not multipart: %v", err)
	}
	if mt, _, _ := mime.ParseMediaType(first.Header.Get("Content-Type")); first.FormName() != "payload" || mt != "application/json" {
		return nil, nil, fmt.Errorf("the first part is %q of type %q; want payload, application/json", first.FormName(), first.Header.Get("Content-Type"))
	}
	raw, err := io.ReadAll(first)
	if err != nil {
		return nil, nil, fmt.Errorf("the payload part: %v", err)
	}
	var payload map[string]any
	var listed struct {
		Files []fileEntry `json:"files"`
	}
	if json.Unmarshal(raw, &payload) != nil || payload == nil || json.Unmarshal(raw, &listed) != nil {
		return nil, nil, errors.New("the payload part is not a JSON object with a files list")
	}
	files, err := readFiles(mr, listed.Files)
	return payload, files, err
}

// readFiles reads the file parts after the payload, checking each against
// its entry in want.
func readFiles(mr *multipart.Reader, want []fileEntry) ([]File, error) {
	byPart := map[string]fileEntry{}
	for _, e := range want {
		byPart[e.Part] = e
	}
	var files []File
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("reading the parts: %v", err)
		}
		e, ok := byPart[p.FormName()]
		if !ok {
			return nil, fmt.Errorf("part %q is not in the payload's files (or comes twice)", p.FormName())
		}
		delete(byPart, e.Part)
		data, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("part %q: %v", e.Part, err)
		}
		sum := sha256.Sum256(data)
		if p.FileName() != e.Name || int64(len(data)) != e.Size || hex.EncodeToString(sum[:]) != e.SHA256 {
			return nil, fmt.Errorf("part %q is %q, %d bytes, sha256 %x; the payload says %q, %d bytes, sha256 %s",
				e.Part, p.FileName(), len(data), sum, e.Name, e.Size, e.SHA256)
		}
		files = append(files, File{Part: e.Part, Name: p.FileName(), MediaType: p.Header.Get("Content-Type"), Data: data})
	}
	if len(byPart) > 0 {
		return nil, fmt.Errorf("the payload names %d parts the body lacks", len(byPart))
	}
	return files, nil
}
