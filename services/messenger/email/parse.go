package email

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"io"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net/mail"
	"net/textproto"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
)

// Bounds on how far the parser follows a mail's structure. A message is
// already bounded in bytes (inbound.max_bytes); these keep a hostile one
// from turning those bytes into deep recursion or thousands of parts.
const (
	maxDepth = 16  // nested multiparts
	maxParts = 500 // leaf parts looked at
	// maxAddressLen is the longest an address can be (RFC 3696 errata:
	// 64 for the local part, @, 255 for the domain).
	maxAddressLen = 320
	// maxHeaderScan is how much of an address or References header is
	// read: far more than any meta value holds, and it keeps a header of a
	// million addresses from costing seconds.
	maxHeaderScan = 32 << 10
	// maxHTMLBytes is how much HTML is turned into text: its text is far
	// longer than any message a butler is given.
	maxHTMLBytes = 1 << 20
)

// parsedMail is one received mail, parsed: the facts an ingress.v1 needs.
type parsedMail struct {
	// fromAddr is the From address, lower-cased ("" if the header has none
	// that parses); fromName its display name, RFC 2047 decoded.
	fromAddr, fromName string
	to, cc             []string // lower-cased addresses of the To and Cc headers
	subject            string
	// messageID, inReplyTo and references are Message-IDs in angle
	// brackets; messageID is "" when the mail has none.
	messageID  string
	inReplyTo  string
	references []string
	date       time.Time // zero without a Date that parses
	// text is the body as plain text: the text/plain parts, else the
	// text/html ones converted.
	text        string
	attachments []attachment
	// loop is why the mail must not be answered (an auto-reply, a mailing
	// list), "" for a mail a person wrote.
	loop string
	// report is set for a multipart/report: a bounce or a read receipt.
	report bool
	// fromUnique is set when the mail has exactly one From header naming
	// exactly one address that parses by RFC 5322: only then can a DKIM
	// signature or a relay's DMARC verdict speak for fromAddr. (With two
	// From headers, a signature covers the last one while readers show the
	// first.)
	fromUnique bool
	// authResults are the Authentication-Results header values (RFC 8601),
	// topmost first: the first is the one the last relay added.
	authResults []string
}

// attachment is a part of a mail that is not its body text. Index is its
// position among the leaf parts, from 1, depth first. Ref names it in
// herald_files once held (holdAttachments); until then, or when it could
// not be held, it is "" and lost says why.
type attachment struct {
	name, mime string
	size       int64
	index      int
	ref, lost  string
}

// holdFunc keeps the attachment a, whose decoded bytes r gives as they
// are read, and sets its ref (or lost), size and mime from what it read.
type holdFunc func(a *attachment, r io.Reader)

// Reasons a mail is accepted and dropped rather than handed on, as
// sink.Dropped records them.
const (
	reasonAutoSubmitted = "auto_submitted"  // Auto-Submitted other than "no" (RFC 3834)
	reasonPrecedence    = "precedence_bulk" // Precedence: bulk, list or junk
	reasonMailingList   = "mailing_list"    // List-Id (RFC 2919)
	reasonBounce        = "bounce"          // null return path or multipart/report (RFC 3464, 8098)
	reasonForeignDomain = "foreign_domain"  // RCPT TO a domain this listener does not serve
	reasonTooLarge      = "too_large"       // over inbound.max_bytes
	reasonMalformed     = "malformed"       // a header that does not parse
	reasonInvalid       = "invalid"         // what the bus refuses as no valid ingress.v1
)

// parseMail reads a mail as received after DATA. Only a header that cannot
// be read is an error; a body that breaks MIME rules gives whatever could
// be read of it, so a person's mail is never lost to a sloppy client.
func parseMail(raw []byte) (*parsedMail, error) {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("reading the header: %w", err)
	}
	h := msg.Header
	m := &parsedMail{
		loop:       loopReason(h),
		subject:    clean(decodeWords(h.Get("Subject"))),
		to:         addresses(prefix(h.Get("To"), maxHeaderScan)),
		cc:         addresses(prefix(h.Get("Cc"), maxHeaderScan)),
		messageID:  first(msgIDs(prefix(h.Get("Message-ID"), maxHeaderScan))),
		inReplyTo:  first(msgIDs(prefix(h.Get("In-Reply-To"), maxHeaderScan))),
		references: msgIDs(prefix(h.Get("References"), maxHeaderScan)),
	}
	if from := addressList(prefix(h.Get("From"), maxHeaderScan)); len(from) > 0 {
		m.fromAddr, m.fromName = from[0].Address, clean(from[0].Name)
	}
	m.fromUnique = uniqueFrom(h)
	m.authResults = h[textproto.CanonicalMIMEHeaderKey("Authentication-Results")]
	if d, err := mail.ParseDate(h.Get("Date")); err == nil {
		m.date = d
	}
	if mt, _ := mediaType(h.Get("Content-Type")); mt == "multipart/report" {
		m.report = true
	}

	var w walker
	w.walk(textproto.MIMEHeader(h), msg.Body, 0)
	m.text = w.bodyText()
	m.attachments = w.attachments
	return m, nil
}

// holdAttachments reads raw's attachments again, as parseMail found them,
// and hands each to hold as it is decoded from its part: only a mail that
// is to be handed on is worth keeping the files of, and that is known only
// once it was parsed and its sender checked.
func holdAttachments(raw []byte, hold holdFunc) []attachment {
	msg, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		return nil
	}
	w := walker{hold: hold}
	w.walk(textproto.MIMEHeader(msg.Header), msg.Body, 0)
	return w.attachments
}

// uniqueFrom reports whether h has one From header with one address in
// it, parsed strictly (no loose fallback as addressList has).
func uniqueFrom(h mail.Header) bool {
	from := h[textproto.CanonicalMIMEHeaderKey("From")]
	if len(from) != 1 || len(from[0]) > maxHeaderScan {
		return false
	}
	p := mail.AddressParser{WordDecoder: wordDecoder}
	list, err := p.ParseList(from[0])
	return err == nil && len(list) == 1 && list[0].Address != "" && len(list[0].Address) <= maxAddressLen
}

// loopReason says whether h marks a mail that no one should answer: the
// rules of RFC 3834 that keep auto-responders from talking to each other.
func loopReason(h mail.Header) string {
	for _, v := range h[textproto.CanonicalMIMEHeaderKey("Auto-Submitted")] {
		// "auto-replied; owner-email=..." carries parameters after ';'.
		kw, _, _ := strings.Cut(v, ";")
		if !strings.EqualFold(strings.TrimSpace(kw), "no") {
			return reasonAutoSubmitted
		}
	}
	for _, v := range h[textproto.CanonicalMIMEHeaderKey("Precedence")] {
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "bulk", "list", "junk":
			return reasonPrecedence
		}
	}
	if _, ok := h[textproto.CanonicalMIMEHeaderKey("List-Id")]; ok {
		return reasonMailingList
	}
	return ""
}

// walker collects the body text and the attachments of a MIME tree.
type walker struct {
	plain, html []string
	attachments []attachment
	leaves      int
	// hold keeps each attachment; without it an attachment is only
	// measured.
	hold holdFunc
}

func (w *walker) walk(h textproto.MIMEHeader, body io.Reader, depth int) {
	mt, params := mediaType(h.Get("Content-Type"))
	if strings.HasPrefix(mt, "multipart/") && params["boundary"] != "" && depth < maxDepth {
		mr := multipart.NewReader(body, params["boundary"])
		for w.leaves < maxParts {
			// NextRawPart leaves the transfer encoding to decodeTransfer,
			// which treats quoted-printable and base64 alike.
			p, err := mr.NextRawPart()
			if err != nil {
				return // the end, or a broken structure: keep what was read
			}
			w.walk(p.Header, p, depth+1)
		}
		return
	}
	if w.leaves >= maxParts {
		return
	}
	w.leaves++
	index := w.leaves

	disposition, dparams := mediaType(h.Get("Content-Disposition"))
	name := dparams["filename"]
	if name == "" {
		name = params["name"]
	}
	// Some clients put RFC 2047 words where RFC 2231 parameters belong.
	name = clean(decodeWords(name))
	encoding := h.Get("Content-Transfer-Encoding")

	if disposition != "attachment" && name == "" {
		switch mt {
		case "text/plain", "text/html":
			data, _ := io.ReadAll(body) // bounded by the message size
			text := toUTF8(decodeTransfer(encoding, data), params["charset"])
			if mt == "text/plain" {
				w.plain = append(w.plain, text)
			} else {
				w.html = append(w.html, text)
			}
			return
		}
	}
	if name == "" {
		name = "part-" + strconv.Itoa(index)
	}
	a := attachment{name: name, mime: mt, index: index}
	// Decoded as it is read, never whole: a file is held chunk by chunk.
	r := transferReader(encoding, body)
	if w.hold != nil {
		w.hold(&a, r)
	} else {
		a.size, _ = io.Copy(io.Discard, r)
	}
	w.attachments = append(w.attachments, a)
}

// bodyText is the text of the mail: its plain-text parts if they say
// anything, else its HTML parts as text; quoted reply tails trimmed, control
// characters dropped.
func (w *walker) bodyText() string {
	text := strings.Join(w.plain, "\n")
	if strings.TrimSpace(text) == "" && len(w.html) > 0 {
		text = htmlToText(prefix(strings.Join(w.html, "\n"), maxHTMLBytes))
	}
	text = strings.ReplaceAll(text, "\r\n", "\n")
	text = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if r == '\r' || unicode.IsControl(r) {
			return -1
		}
		return r
	}, text)
	return strings.TrimSpace(trimQuotedTail(text))
}

// mediaType parses a Content-Type or Content-Disposition value; a value that
// does not parse is text/plain, the default of RFC 2045 §5.2 (for a
// disposition it matters only that it is not "attachment").
func mediaType(v string) (string, map[string]string) {
	mt, params, err := mime.ParseMediaType(v)
	if (err != nil && !errors.Is(err, mime.ErrInvalidMediaParameter)) || mt == "" {
		return "text/plain", map[string]string{}
	}
	return mt, params
}

// decodeTransfer undoes a Content-Transfer-Encoding. What fails to decode is
// kept as far as it decoded (base64), or as sent (quoted-printable), rather
// than dropped.
func decodeTransfer(encoding string, data []byte) []byte {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		out, err := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(data)))
		if err != nil {
			return data
		}
		return out
	case "base64":
		out, _ := io.ReadAll(transferReader(encoding, bytes.NewReader(data)))
		return out
	}
	return data
}

// transferReader undoes a Content-Transfer-Encoding as r is read. What
// fails to decode ends the part where it fails: a sloppy client's file is
// kept as far as it decoded rather than lost.
func transferReader(encoding string, r io.Reader) io.Reader {
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "quoted-printable":
		return lenient{quotedprintable.NewReader(r)}
	case "base64":
		// Without its padding, base64 decodes whatever the final padding
		// (often missing, sometimes doubled) would have said.
		return lenient{base64.NewDecoder(base64.RawStdEncoding, base64Chars{r})}
	}
	return r
}

// base64Chars is r without spaces, line breaks and padding.
type base64Chars struct{ r io.Reader }

func (b base64Chars) Read(p []byte) (int, error) {
	for {
		n, err := b.r.Read(p)
		k := 0
		for _, c := range p[:n] {
			if c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '=' {
				p[k] = c
				k++
			}
		}
		if k > 0 || err != nil {
			return k, err
		}
	}
}

// lenient turns a decoding error into the end of the data.
type lenient struct{ r io.Reader }

func (l lenient) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = io.EOF
	}
	return n, err
}

// wordDecoder decodes RFC 2047 encoded words. mime handles UTF-8,
// ISO-8859-1 and US-ASCII itself; every other charset x/text knows comes
// through CharsetReader. A charset it does not know leaves the header as sent.
var wordDecoder = &mime.WordDecoder{
	CharsetReader: func(charset string, input io.Reader) (io.Reader, error) {
		b, err := io.ReadAll(input)
		if err != nil {
			return nil, err
		}
		if !knownCharset(charset) {
			return nil, fmt.Errorf("unsupported charset %q", charset)
		}
		return strings.NewReader(toUTF8(b, charset)), nil
	},
}

// decodeWords decodes the encoded words of a header value; a value that
// does not decode is kept as sent, made valid UTF-8.
func decodeWords(s string) string {
	if d, err := wordDecoder.DecodeHeader(s); err == nil {
		s = d
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// addressList parses an address header; if it breaks RFC 5322, whatever
// looks like an address is taken, without names. Addresses are lower-cased.
func addressList(s string) []*mail.Address {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	p := mail.AddressParser{WordDecoder: wordDecoder}
	list, err := p.ParseList(s)
	if err != nil {
		list = nil
		for _, a := range looseAddress.FindAllString(s, -1) {
			list = append(list, &mail.Address{Address: a})
		}
	}
	out := list[:0]
	for _, a := range list {
		a.Address = strings.ToLower(strings.ToValidUTF8(a.Address, ""))
		if a.Address != "" && len(a.Address) <= maxAddressLen {
			out = append(out, a)
		}
	}
	return out
}

var looseAddress = regexp.MustCompile(`[^\s<>()\[\]",;:@]+@[^\s<>()\[\]",;:@]+`)

func addresses(s string) []string {
	var out []string
	for _, a := range addressList(s) {
		out = append(out, a.Address)
	}
	return out
}

// bracketed matches one msg-id of RFC 5322 §3.6.4 with its angle brackets.
var bracketed = regexp.MustCompile(`<[^<>]*>`)

// msgIDs reads the Message-IDs of a Message-ID, In-Reply-To or References
// header, each as "<id>" in the form msgID gives it, so that an id read
// here and written again by compose is the same string. A lone id without
// brackets, as some clients write it, is taken too.
func msgIDs(s string) []string {
	var ids []string
	for _, raw := range bracketed.FindAllString(s, -1) {
		if id := msgID(raw); id != "" {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		if f := strings.Fields(s); len(f) == 1 && strings.Contains(f[0], "@") {
			if id := msgID(f[0]); id != "" {
				ids = append(ids, id)
			}
		}
	}
	return ids
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// knownCharset reports whether toUTF8 converts charset faithfully.
func knownCharset(charset string) bool {
	switch normCharset(charset) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return true
	}
	return lookupCharset(charset) != nil
}

func normCharset(charset string) string {
	return strings.ToLower(strings.Trim(strings.TrimSpace(charset), `"'`))
}

// lookupCharset finds charset by its WHATWG label (what mail clients and
// browsers accept: koi8-r, shift_jis, iso-2022-jp, windows-1252, ...) or its
// IANA MIME name; nil if neither knows it.
func lookupCharset(charset string) encoding.Encoding {
	name := normCharset(charset)
	if e, err := htmlindex.Get(name); err == nil && e != nil {
		return e
	}
	if e, err := ianaindex.MIME.Encoding(name); err == nil && e != nil {
		return e
	}
	return nil
}

// toUTF8 converts text in charset to UTF-8 with golang.org/x/text's
// decoders. UTF-8, ASCII and an unknown charset are kept as far as they are
// valid UTF-8.
func toUTF8(b []byte, charset string) string {
	switch normCharset(charset) {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	e := lookupCharset(charset)
	if e == nil {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	out, err := e.NewDecoder().Bytes(b)
	if err != nil {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	return strings.ToValidUTF8(string(out), "\uFFFD")
}

// The steps of htmlToText. Go's regexp runs in linear time, so no input
// makes them slow.
var (
	htmlComment   = regexp.MustCompile(`(?s)<!--.*?-->`)
	htmlHidden    = regexp.MustCompile(`(?is)<(script|style|head|title|template)\b[^>]*>.*?</(script|style|head|title|template)\s*>`)
	htmlBreak     = regexp.MustCompile(`(?i)<br\b[^>]*>`)
	htmlBlock     = regexp.MustCompile(`(?i)</?(p|div|table|thead|tbody|ul|ol|dl|dt|dd|h[1-6]|blockquote|pre|section|article|header|footer|hr|center|address)\b[^>]*>`)
	htmlItem      = regexp.MustCompile(`(?i)<li\b[^>]*>`)
	htmlRowEnd    = regexp.MustCompile(`(?i)</tr\s*>`)
	htmlCell      = regexp.MustCompile(`(?i)</?(td|th)\b[^>]*>`)
	htmlTag       = regexp.MustCompile(`(?s)</?[a-zA-Z!][^>]*>`)
	spaceRun      = regexp.MustCompile(`[ \t\r\n\f\v]+`)
	lineSpaceRun  = regexp.MustCompile(`[ \t\x{a0}]+`)
	blankLinesRun = regexp.MustCompile(`\n{3,}`)
)

// htmlToText turns an HTML body into plain text: scripts, styles and
// comments go, block elements become line breaks, every other tag goes,
// entities are decoded. The result is text, never markup that could be
// rendered.
func htmlToText(s string) string {
	s = htmlComment.ReplaceAllString(s, "")
	s = htmlHidden.ReplaceAllString(s, "")
	// Line breaks in HTML source are spaces; the tags below make the lines.
	s = spaceRun.ReplaceAllString(s, " ")
	s = htmlBreak.ReplaceAllString(s, "\n")
	s = htmlBlock.ReplaceAllString(s, "\n")
	s = htmlItem.ReplaceAllString(s, "\n- ")
	s = htmlRowEnd.ReplaceAllString(s, "\n")
	s = htmlCell.ReplaceAllString(s, " ")
	s = htmlTag.ReplaceAllString(s, "")
	s = html.UnescapeString(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(lineSpaceRun.ReplaceAllString(l, " "))
	}
	s = strings.Join(lines, "\n")
	return strings.TrimSpace(blankLinesRun.ReplaceAllString(s, "\n\n"))
}

// attribution matches the line a mail client writes above a quoted reply:
// "On Mon, 1 Jan 2024, Ann <ann@example.com> wrote:" and its translations
// ("Am 01.01.2024 schrieb Ann <ann@example.com>:"). isAttribution also wants
// a date or an address in it, which a sentence of the answer rarely has.
var attribution = regexp.MustCompile(`(?i)^(on|am|le|el|il|op|em)\s.*\s(wrote|schrieb|a écrit|escribió|ha scritto|schreef|escreveu)(\s.*)?:$`)

func isAttribution(line string) bool {
	return attribution.MatchString(line) && strings.ContainsAny(line, "@0123456789")
}

// trimQuotedTail drops the quoted copy of the previous mail that clients
// append below a reply ("On ... wrote:" followed only by "> " lines), which
// the butler already has in its thread. Only a tail is trimmed, and only
// when it is quoted throughout; text written between quotes is a person's
// answer and stays.
func trimQuotedTail(text string) string {
	lines := strings.Split(text, "\n")
	end := len(lines)
	for end > 0 && strings.TrimSpace(lines[end-1]) == "" {
		end--
	}
	start := end
	for start > 0 && (strings.HasPrefix(lines[start-1], ">") || strings.TrimSpace(lines[start-1]) == "") {
		start--
	}
	if start == end {
		return text
	}
	// The quote must follow an attribution line (possibly wrapped onto two
	// lines, "On ... <ann@example.com>" / "wrote:"), or it may be an inline
	// quote that ends the mail on purpose.
	cut := start
	for cut > 0 && strings.TrimSpace(lines[cut-1]) == "" {
		cut--
	}
	if cut == 0 {
		return text
	}
	prev := strings.TrimSpace(lines[cut-1])
	switch {
	case isAttribution(prev):
		cut--
	case cut >= 2 && utf8.RuneCountInString(prev) < 40 && isAttribution(strings.TrimSpace(lines[cut-2])+" "+prev):
		cut -= 2
	default:
		return text
	}
	kept := strings.TrimRightFunc(strings.Join(lines[:cut], "\n"), unicode.IsSpace)
	if kept == "" {
		return text // a mail that is only a quote keeps it
	}
	return kept
}
