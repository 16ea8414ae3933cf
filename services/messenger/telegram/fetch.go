package telegram

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-telegram/bot"

	"github.com/heraldhq/herald/pkg/bus"
	"github.com/heraldhq/herald/pkg/envelope"
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
