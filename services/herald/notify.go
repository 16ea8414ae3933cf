package herald

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/heraldhq/herald/services/butler"
)

// ErrNotifyFailed means the notify tool answered isError.
var ErrNotifyFailed = errors.New("notification failed")

// NotifyArgs are the arguments of `herald notify`.
type NotifyArgs struct {
	URL            string // the butler's MCP endpoint
	Channel        string
	Intent         string
	RequestContext string
	Emoji          string
	Subject        string
	Urgency        string
	Recipient      string
	Message        string
	// Token is the bearer token the butler's MCP endpoint needs.
	Token string
}

// Notify calls the notify tool of the butler at a.URL, exactly as a model
// would, and writes the tool's answer to out.
func Notify(ctx context.Context, a NotifyArgs, out io.Writer) error {
	var opts []transport.StreamableHTTPCOption
	if a.Token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + a.Token}))
	}
	c, err := client.NewStreamableHttpClient(a.URL, opts...)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Start(ctx); err != nil {
		return fmt.Errorf("connecting to the butler at %s: %w (is herald dev running?)", a.URL, err)
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "herald-cli", Version: butler.Version}
	if _, err := c.Initialize(ctx, init); err != nil {
		if _, refused := errors.AsType[*transport.AuthorizationRequiredError](err); refused {
			return fmt.Errorf("the butler at %s refused the request: %s", a.URL, noTokenHint(a.Token))
		}
		return fmt.Errorf("connecting to the butler at %s: %w (is herald dev running?)", a.URL, err)
	}
	args := map[string]any{}
	for k, v := range map[string]string{"channel": a.Channel, "intent": a.Intent, "emoji": a.Emoji, "subject": a.Subject, "urgency": a.Urgency, "recipient": a.Recipient, "message": a.Message} {
		if v != "" {
			args[k] = v
		}
	}
	if a.RequestContext != "" {
		var rc any
		if err := json.Unmarshal([]byte(a.RequestContext), &rc); err != nil {
			return fmt.Errorf("--request-context is not JSON: %w", err)
		}
		args["request_context"] = rc
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "notify"
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("calling notify: %w", err)
	}
	var text []string
	for _, content := range res.Content {
		if t, ok := content.(mcp.TextContent); ok {
			text = append(text, t.Text)
		}
	}
	if res.IsError {
		if fix := forPeople(strings.Join(text, "\n")); fix != "" {
			return fmt.Errorf("%s", fix)
		}
		fmt.Fprintln(out, strings.Join(text, "\n"))
		return ErrNotifyFailed
	}
	fmt.Fprintln(out, strings.Join(text, "\n"))
	return nil
}

// notifyFlags are the command's words for the notify tool's arguments, by
// the pointer a validation error names them with.
var notifyFlags = map[string]string{
	"message": "MESSAGE (the words after the flags)", "channel": "--channel", "intent": "--intent",
	"recipient": "--recipient", "subject": "--subject", "emoji": "--emoji", "urgency": "--urgency",
	"request_context": "--request-context",
}

var fieldErrors = regexp.MustCompile(`(/[a-z_]+(?:/[a-z_]+)*): ([^;]+)`)

// forPeople turns the notify tool's validation error, worded for a model
// ("... /delivery/message: is required. Fix the arguments and call notify
// again"), into a sentence about the flag or argument to fix; "" for any
// other answer, which is printed as the tool gave it.
func forPeople(text string) string {
	if !strings.Contains(text, "(validation_error)") {
		return ""
	}
	var fixes []string
	for _, m := range fieldErrors.FindAllStringSubmatch(text, -1) {
		parts := strings.Split(m[1], "/")
		flag, ok := notifyFlags[parts[len(parts)-1]]
		if !ok && len(parts) > 2 && parts[1] == "request_context" {
			flag, ok = notifyFlags["request_context"], true
		}
		if !ok {
			continue
		}
		why := strings.TrimSpace(strings.TrimSuffix(m[2], "."))
		if i := strings.Index(why, ". Fix the arguments"); i >= 0 {
			why = why[:i]
		}
		fixes = append(fixes, flag+" "+why)
	}
	if len(fixes) == 0 {
		return ""
	}
	return "fix the command: " + strings.Join(fixes, "; ") + " (herald notify --help lists the flags)"
}

// noTokenHint says where herald notify looks for a token, never what it sent.
func noTokenHint(sent string) string {
	where := "set " + EnvMCPToken + " (a token from herald token mint), give the butler mcp_token_env or mcp_token_file in the config herald notify reads, or run herald notify where herald dev keeps its tokens (.herald/tokens)"
	if sent == "" {
		return "it needs a bearer token and none was found; " + where
	}
	return "the token sent is not valid (revoked, expired, or another butler's); " + where
}
