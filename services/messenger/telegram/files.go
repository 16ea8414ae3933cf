package telegram

import (
	"context"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // photoable decodes their sizes
	_ "image/png"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/heraldhq/herald/pkg/bus"
	telegramspec "github.com/heraldhq/herald/pkg/channel/telegram"
	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/pkg/markdown"
	"github.com/heraldhq/herald/services/messenger/deliver"
)

// MaxDownload is the largest file the Bot API lets a bot download
// (getFile: "up to 20 MB").
const MaxDownload = 20 << 20

// Fetch writes the file of attachment a (deliver.Fetcher): getFile names
// its path, which is downloaded from the Bot API's file URL. That URL
// holds the token, so no error repeats it.
func (s *sender) Fetch(ctx context.Context, a envelope.Attachment, w io.Writer) error {
	id, ok := strings.CutPrefix(a.Ref, fileRefPrefix)
	if !ok || id == "" {
		return fmt.Errorf("%w: %q is not a Telegram file", envelope.ErrValidation, a.Ref)
	}
	if a.Size > MaxDownload {
		return fmt.Errorf("%w: Telegram lets a bot download files of up to %s; %s is %s. Ask for it another way (a link, or smaller parts)",
			envelope.ErrValidation, bus.Bytes(MaxDownload), a.Name, bus.Bytes(a.Size))
	}
	f, err := s.bot.GetFile(ctx, &bot.GetFileParams{FileID: id})
	if err != nil {
		if strings.Contains(strings.ToLower(err.Error()), "file is too big") {
			return fmt.Errorf("%w: Telegram lets a bot download files of up to %s, and %s is bigger", envelope.ErrValidation, bus.Bytes(MaxDownload), a.Name)
		}
		return s.classify(ctx, "getFile", "", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.bot.FileDownloadLink(f), nil)
	if err != nil {
		return fmt.Errorf("%w: telegram file path: %s", envelope.ErrInternal, s.secrets.Scrub(err.Error()))
	}
	// The client's own bound is for one call's JSON; a file takes as long
	// as it takes, within ctx.
	files := &http.Client{Transport: s.client.Transport, CheckRedirect: s.client.CheckRedirect}
	resp, err := files.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // its text starts with the URL, which holds the token
		}
		return fmt.Errorf("%w: downloading the file from Telegram: %s", envelope.ErrTargetUnavailable, s.secrets.Scrub(err.Error()))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		class := envelope.ErrTargetUnavailable
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusBadRequest {
			class = envelope.ErrNotFound
		}
		return fmt.Errorf("%w: Telegram answered %d to the file's download", class, resp.StatusCode)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("downloading the file from Telegram: %s", s.secrets.Scrub(err.Error()))
	}
	return nil
}

// Telegram's limits on what a bot sends (Bot API sendPhoto, sendDocument).
const (
	// MaxCaptionLength is a caption's limit, in UTF-16 units.
	MaxCaptionLength = 1024
	// maxPhoto is the largest image sent as a photo; a larger one goes
	// as a document.
	maxPhoto = 10 << 20
	// uploadTimeout bounds one upload (a file of up to 50 MB).
	uploadTimeout = 10 * time.Minute
)

// sendFiles sends d's message with its files: the message as the caption
// of the first file where it fits, else as messages of its own first;
// one file as a photo (an image within Telegram's photo limits) or a
// document, several as one media group. Each call is a chunk of the
// delivery, so a retry never sends a part twice unannounced.
func (s *sender) sendFiles(ctx context.Context, d deliver.Delivery, chat string, md string, thread int, reply *models.ReplyParameters, buttons models.ReplyMarkup) (deliver.Receipt, error) {
	var texts []string
	caption := ""
	doc := markdown.Parse(md)
	if c := telegramspec.Chunks(doc, MaxCaptionLength); len(c) == 1 {
		caption = c[0]
	} else {
		texts = telegramspec.Chunks(doc, MaxMessageLength)
	}
	photos := true
	for _, f := range d.Files {
		photos = photos && photoable(f)
	}
	return d.SendChunks(len(texts)+1, func() error { return s.wait(ctx, chat) }, func(i int) (string, error) {
		if i < len(texts) {
			var rp *models.ReplyParameters
			if i == 0 {
				rp = reply
			}
			return s.sendText(ctx, d, chat, texts[i], thread, rp, nil)
		}
		if len(texts) > 0 {
			reply = nil // the first text message was the reply
		}
		return s.sendMedia(ctx, d, chat, caption, thread, reply, buttons, photos)
	})
}

// sendMedia makes the one call that uploads d's files. The files are
// opened for each try (a 429 waited out sends the call again).
func (s *sender) sendMedia(ctx context.Context, d deliver.Delivery, chat, caption string, thread int, reply *models.ReplyParameters, buttons models.ReplyMarkup, photos bool) (string, error) {
	quiet := d.Urgency == "low"
	method := "sendMediaGroup"
	switch {
	case len(d.Files) > 1:
	case photos:
		method = "sendPhoto"
	default:
		method = "sendDocument"
	}
	var id int
	err := s.call(ctx, method, chat, func(ctx context.Context) error {
		readers := make([]io.Reader, len(d.Files))
		for i, f := range d.Files {
			r, err := os.Open(f.Path)
			if err != nil {
				return fmt.Errorf("%w: file %s: %w", envelope.ErrInternal, f.Name, err)
			}
			defer r.Close()
			readers[i] = r
		}
		var msg *models.Message
		var err error
		switch method {
		case "sendPhoto":
			msg, err = s.uploads.SendPhoto(ctx, &bot.SendPhotoParams{ChatID: chat, Photo: &models.InputFileUpload{Filename: d.Files[0].Name, Data: readers[0]},
				Caption: caption, ParseMode: models.ParseModeHTML, ReplyParameters: reply, ReplyMarkup: buttons, DisableNotification: quiet, MessageThreadID: thread})
		case "sendDocument":
			msg, err = s.uploads.SendDocument(ctx, &bot.SendDocumentParams{ChatID: chat, Document: &models.InputFileUpload{Filename: d.Files[0].Name, Data: readers[0]},
				Caption: caption, ParseMode: models.ParseModeHTML, ReplyParameters: reply, ReplyMarkup: buttons, DisableNotification: quiet, MessageThreadID: thread})
		default:
			media := make([]models.InputMedia, len(d.Files))
			names := attachNames(d.Files)
			for i := range d.Files {
				c, ref := "", "attach://"+names[i]
				if i == 0 {
					c = caption
				}
				if photos {
					media[i] = &models.InputMediaPhoto{Media: ref, Caption: c, ParseMode: models.ParseModeHTML, MediaAttachment: readers[i]}
				} else {
					media[i] = &models.InputMediaDocument{Media: ref, Caption: c, ParseMode: models.ParseModeHTML, MediaAttachment: readers[i]}
				}
			}
			var msgs []*models.Message
			msgs, err = s.uploads.SendMediaGroup(ctx, &bot.SendMediaGroupParams{ChatID: chat, Media: media, ReplyParameters: reply, DisableNotification: quiet, MessageThreadID: thread})
			if len(msgs) > 0 {
				msg = msgs[0]
			}
		}
		if err == nil && msg != nil {
			id = msg.ID
		}
		return err
	})
	if err != nil {
		return "", s.tooBig(err)
	}
	return strconv.Itoa(id), nil
}

// attachNames are the multipart fields of a media group's files: the
// library names each part's file after its field, and Telegram shows a
// document by that name, so each is the file's own name where it can be
// (unique, nothing a Content-Disposition would have to escape), else the
// name with its place in front.
func attachNames(files []deliver.File) []string {
	out := make([]string, len(files))
	seen := map[string]bool{}
	for i, f := range files {
		name := f.Name
		if seen[name] || strings.ContainsAny(name, "\"\\\r\n") {
			name = strconv.Itoa(i+1) + "_" + strings.Map(func(r rune) rune {
				if r == '"' || r == '\\' || r < ' ' {
					return '_'
				}
				return r
			}, name)
		}
		seen[name] = true
		out[i] = name
	}
	return out
}

// tooBig names the limit when Telegram says a file is too large (413, or
// "file is too big"); other errors are as they came.
func (s *sender) tooBig(err error) error {
	lower := strings.ToLower(err.Error())
	if strings.Contains(lower, "too big") || strings.Contains(lower, "too large") {
		return fmt.Errorf("%w: Telegram refused the file as too big: a bot may send files of up to 50 MB, photos of up to 10 MB (%s)", envelope.ErrValidation, s.secrets.Scrub(err.Error()))
	}
	return err
}

// photoable: Telegram shows f as a photo (JPEG or PNG, at most 10 MB, width
// and height at most 10000 together and in a ratio of at most 20).
func photoable(f deliver.File) bool {
	if (f.MediaType != "image/jpeg" && f.MediaType != "image/png") || f.Size > maxPhoto {
		return false
	}
	r, err := os.Open(f.Path)
	if err != nil {
		return false
	}
	defer r.Close()
	c, _, err := image.DecodeConfig(r)
	if err != nil || c.Width <= 0 || c.Height <= 0 {
		return false
	}
	return c.Width+c.Height <= 10000 && max(c.Width, c.Height) <= 20*min(c.Width, c.Height)
}
