package butler

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
)

const (
	// downloadWait bounds a download_attachment call: the messenger's
	// fetch from the provider, then the read from herald_files.
	downloadWait = 6 * time.Minute
	// imageInline is the largest image download_attachment also returns
	// as image content, so a client on another machine sees it.
	imageInline = 5 << 20
)

func (b *Butler) addFileTools() {
	b.mcp.AddTool(mcp.NewTool("download_attachment",
		mcp.WithDescription("Fetch a file a person attached to a message you were given (its meta.attachments lists them). Saves it under your files inbox and answers the path; an image of up to 5 MB also comes back as an image you can see."),
		mcp.WithString("request_id", mcp.Required(), mcp.Description("The message's meta.request_id")),
		mcp.WithNumber("index", mcp.Description("Which of its attachments, counting from 0 in the order meta.attachments lists them (default 0)")),
		alwaysLoad,
	), b.counted(b.downloadAttachment))
}

func (b *Butler) downloadAttachment(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	id := strings.TrimSpace(req.GetString("request_id", ""))
	index := req.GetInt("index", 0)
	in, err := b.channel.request(ctx, id)
	if err != nil {
		return downloadError(err), nil
	}
	if index < 0 || index >= len(in.Attachments) {
		return downloadError(fmt.Errorf("%w: message %s has %d attachment(s); index %d is not one (they count from 0)", envelope.ErrNotFound, id, len(in.Attachments), index)), nil
	}
	ctx, cancel := context.WithTimeout(ctx, downloadWait)
	defer cancel()
	body, _ := json.Marshal(bus.DownloadRequest{RequestID: id, Index: index})
	msg, err := b.nc.RequestWithContext(ctx, bus.DownloadSubject(b.name), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return downloadError(fmt.Errorf("%w: no messenger is running to fetch the file; try again when it is", envelope.ErrTargetUnavailable)), nil
	}
	if err != nil {
		return downloadError(fmt.Errorf("%w: the messenger did not answer: %w", envelope.ErrTimeout, err)), nil
	}
	var a bus.DownloadAnswer
	if err := json.Unmarshal(msg.Data, &a); err != nil {
		return downloadError(fmt.Errorf("%w: the messenger's answer: %w", envelope.ErrInternal, err)), nil
	}
	if a.Error != nil {
		return downloadError(a.Error), nil
	}
	path, err := b.save(ctx, id, index, a)
	if err != nil {
		return downloadError(err), nil
	}
	text := fmt.Sprintf("Saved %s (%s, %s) to %s", a.Name, a.Mime, bus.Bytes(a.Size), path)
	if strings.HasPrefix(a.Mime, "image/") && a.Size <= imageInline {
		data, err := os.ReadFile(path)
		if err == nil {
			return mcp.NewToolResultImage(text, base64.StdEncoding.EncodeToString(data), a.Mime), nil
		}
	}
	return mcp.NewToolResultText(text), nil
}

// save writes the file a names from herald_files into the butler's inbox,
// readable by its user alone, and returns its path. A file that does not
// match its sha256 is not kept.
func (b *Butler) save(ctx context.Context, id string, index int, a bus.DownloadAnswer) (string, error) {
	dir := b.config().Butler(b.name).FileInbox(b.dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("%w: files.inbox %s: %w", envelope.ErrInternal, dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".download-*")
	if err != nil {
		return "", fmt.Errorf("%w: files.inbox %s: %w", envelope.ErrInternal, dir, err)
	}
	defer os.Remove(tmp.Name()) // gone once renamed
	err = bus.GetFile(ctx, b.nc, bus.FileInSubject(b.name, id, index), a.Size, a.SHA256, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, id+"-"+strconv.Itoa(index)+"-"+safeName(a.Name))
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("%w: files.inbox: %w", envelope.ErrInternal, err)
	}
	return path, nil
}

// safeName is a file name a person gave, made safe to save under: no
// directory, no control characters, no leading dot, not too long.
func safeName(name string) string {
	name = filepath.Base(strings.ReplaceAll(name, "\\", "/"))
	name = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '/' {
			return '_'
		}
		return r
	}, name)
	name = strings.TrimLeft(name, ".")
	if r := []rune(name); len(r) > 100 {
		name = string(r[len(r)-100:])
	}
	if name == "" {
		return "file"
	}
	return name
}

// downloadError is download_attachment's answer to err.
func downloadError(err error) *mcp.CallToolResult {
	body := envelope.ErrorBodyFrom(err)
	advice := "Retrying as is will not help."
	if body.Retryable {
		advice = "This can pass: retry later."
	}
	return mcp.NewToolResultError(fmt.Sprintf("Download failed (%s): %s. %s", body.Class, body.Message, advice))
}
