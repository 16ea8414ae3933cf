package butler

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/nats-io/nats.go"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/config"
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

// maxFiles is how many files one message carries.
const maxFiles = 10

// filesArg reads the files argument: a list of paths.
func filesArg(v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: files must be a list of file paths", envelope.ErrValidation)
	}
	if len(list) > maxFiles {
		return nil, fmt.Errorf("%w: files names %d files; a message carries at most %d", envelope.ErrValidation, len(list), maxFiles)
	}
	paths := make([]string, 0, len(list))
	for _, p := range list {
		s, ok := p.(string)
		if !ok || strings.TrimSpace(s) == "" {
			return nil, fmt.Errorf("%w: files must be a list of file paths", envelope.ErrValidation)
		}
		paths = append(paths, s)
	}
	return paths, nil
}

// attach checks each path against files.roots and the limits, writes each
// file into herald_files as this butler's, and names them in n.
func (b *Butler) attach(ctx context.Context, n *envelope.Notify, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	own := b.config().Butler(b.name)
	limit, why := own.FileMaxBytes(), "files.max_bytes"
	channel := n.Delivery.Channel
	if channel == "" && own != nil {
		channel = own.DefaultChannel
	}
	if channel != "" {
		typ, _, _ := strings.Cut(channel, ":")
		ch, _ := config.ChannelOf(typ)
		if ch.MaxFile == 0 {
			return fmt.Errorf("%w: %s cannot carry files; send them another way, or name the files in the message", envelope.ErrValidation, typ)
		}
		if ch.MaxFile < limit {
			limit, why = ch.MaxFile, typ+"'s limit"
		}
	}
	for _, p := range paths {
		f, err := b.upload(ctx, own, p, limit, why)
		if err != nil {
			return err
		}
		n.Delivery.Files = append(n.Delivery.Files, f)
	}
	return nil
}

// upload sends the file at p, if the butler may, into herald_files.
func (b *Butler) upload(ctx context.Context, own *config.Butler, p string, limit int64, why string) (envelope.File, error) {
	f, real, err := b.openAllowed(own, p)
	if err != nil {
		return envelope.File{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return envelope.File{}, fmt.Errorf("%w: file %s: %w", envelope.ErrValidation, p, err)
	}
	if st.Size() > limit {
		return envelope.File{}, fmt.Errorf("%w: file %s is %s, over %s (%s)", envelope.ErrValidation, p, bus.Bytes(st.Size()), why, bus.Bytes(limit))
	}
	// Its name in herald_files is its content's, so the same file sent
	// again (a retry with its idempotency_key) is the same notify.
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, limit+1)); err != nil {
		return envelope.File{}, fmt.Errorf("%w: reading file %s: %w", envelope.ErrValidation, p, err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return envelope.File{}, fmt.Errorf("%w: reading file %s: %w", envelope.ErrValidation, p, err)
	}
	object := hex.EncodeToString(h.Sum(nil))[:32]
	sum, err := bus.PutFile(ctx, b.client.JS, bus.FileOutSubject(b.name, object), f, limit)
	if errors.Is(err, envelope.ErrValidation) {
		return envelope.File{}, fmt.Errorf("%w: file %s grew over %s (%s) while it was read", envelope.ErrValidation, p, why, bus.Bytes(limit))
	}
	if err != nil {
		return envelope.File{}, fmt.Errorf("file %s: %w", p, err)
	}
	if sum.SHA256[:32] != object {
		return envelope.File{}, fmt.Errorf("%w: file %s changed while it was read; send it again when it is written", envelope.ErrValidation, p)
	}
	name := filepath.Base(real)
	return envelope.File{Name: name, Size: sum.Size, SHA256: sum.SHA256, MediaType: bus.MediaType(sum.Head, mime.TypeByExtension(filepath.Ext(name))), Object: object}, nil
}

// openAllowed opens the file at p if the butler may send it: a regular
// file under one of its files.roots once symlinks are resolved, and not
// Herald's own state or a secret. Every refusal names the path and the rule.
func (b *Butler) openAllowed(own *config.Butler, p string) (*os.File, string, error) {
	refuse := func(rule string) (*os.File, string, error) {
		return nil, "", fmt.Errorf("%w: file %s is not sent: %s", envelope.ErrForbidden, p, rule)
	}
	abs := p
	if !filepath.IsAbs(abs) {
		abs = filepath.Join(b.dir, p)
	}
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", fmt.Errorf("%w: file %s does not exist (relative paths start from %s)", envelope.ErrNotFound, p, b.dir)
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: file %s: %w", envelope.ErrValidation, p, err)
	}
	roots := own.FileRoots(b.dir)
	inside := false
	for _, root := range roots {
		if r, err := filepath.EvalSymlinks(root); err == nil {
			root = r
		}
		if rel, err := filepath.Rel(root, real); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			inside = true
			break
		}
	}
	if !inside {
		return refuse(fmt.Sprintf("it is %s, outside files.roots (%s); only files under them may be sent", real, strings.Join(roots, ", ")))
	}
	if why := secretFile(own, b.dir, real); why != "" {
		return refuse(why)
	}
	f, err := os.Open(real)
	if err != nil {
		return nil, "", fmt.Errorf("%w: file %s: %w", envelope.ErrValidation, p, err)
	}
	st, err := f.Stat()
	if err == nil && !st.Mode().IsRegular() {
		f.Close()
		return refuse("it is not a regular file")
	}
	if lst, lerr := os.Stat(real); err != nil || lerr != nil || !os.SameFile(st, lst) {
		f.Close()
		return refuse("it changed while it was checked")
	}
	return f, real, nil
}

// secretFile says why the file at real (symlinks resolved) is Herald's own
// state or a secret, never to be sent; "" if it is neither.
func secretFile(own *config.Butler, dir, real string) string {
	for _, part := range strings.Split(real, string(filepath.Separator)) {
		if part == ".herald" {
			return "it is in .herald/, Herald's own state (tokens, downloads, the bus's data)"
		}
	}
	base := strings.ToLower(filepath.Base(real))
	switch {
	case base == ".env", strings.HasPrefix(base, ".env."), strings.HasSuffix(base, ".env"):
		return "it is an environment file, where secrets are kept"
	case strings.HasSuffix(base, ".creds"), strings.HasSuffix(base, ".nk"), strings.HasSuffix(base, ".nkey"):
		return "it is a NATS credentials file"
	}
	if own != nil && own.MCPTokenFile != "" {
		if tf, err := filepath.EvalSymlinks(config.AbsIn(dir, own.MCPTokenFile)); err == nil && tf == real {
			return "it is this butler's MCP token file (mcp_token_file)"
		}
	}
	return ""
}
