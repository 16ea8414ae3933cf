package butler

import (
	"context"
	"encoding/json"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/heraldhq/herald/pkg/approval"
)

// ApproveTool is the tool a run's Claude Code asks permission through
// (--permission-prompt-tool mcp__herald__approve): each call is a
// permission prompt to the butler's approvers, as a channel permission
// request is, and waits for their verdict.
const ApproveTool = "approve"

// verdictPoll is how often an approve call reads its prompt's record, for
// a verdict whose inbox message it missed and for expiry.
const verdictPoll = 2 * time.Second

// approveTool is the tool's listing: only a run's session has it
// (runTools), so no model in a terminal sees it.
var approveTool = mcp.NewTool(ApproveTool,
	mcp.WithDescription("Herald's permission prompt for the runs it starts (claude --permission-prompt-tool): asks this butler's approvers whether a tool call may run."),
	mcp.WithString("tool_name", mcp.Required(), mcp.Description("The tool Claude Code asks to run.")),
	mcp.WithObject("input", mcp.Description("The call's input.")),
	mcp.WithString("tool_use_id", mcp.Description("Claude Code's id of the call.")),
)

// runTools gives the session of a run its own tools.
func (b *Butler) runTools(s server.ClientSession) {
	if err := b.mcp.AddSessionTool(s.SessionID(), approveTool, b.counted(b.approve)); err != nil {
		b.log.Warn("a run's session has no approve tool: its permission questions are denied", "err", err)
	}
}

// approve answers Claude Code's permission question in its shape: a text
// block {"behavior":"allow","updatedInput":…} or {"behavior":"deny",
// "message":…}. Only an approver decides; the run never does.
func (b *Butler) approve(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	session := server.ClientSessionFromContext(ctx)
	if session == nil || runOf(ctx) == "" {
		return permissionAnswer(approval.Deny, nil, "only a run Herald started asks permission through this tool"), nil
	}
	tool := req.GetString("tool_name", "")
	input, _ := req.GetArguments()["input"].(map[string]any)
	id := newPromptID()
	if g := b.grant(ctx, session, id, tool); g != nil {
		b.grantUsed(ctx, id, tool, g)
		return permissionAnswer(approval.Allow, input, ""), nil
	}
	verdicts := b.channel.expectVerdict(id)
	defer b.channel.forgetVerdict(id)
	b.channel.opened(session.SessionID(), id)
	defer b.channel.answered(session.SessionID(), id)
	description, preview := describeCall(input)
	if !b.openPrompt(ctx, session, id, tool, description, preview) {
		return permissionAnswer(approval.Deny, nil, "nobody can be asked: no integration granted to this butler lists approvers"), nil
	}
	tick := time.NewTicker(verdictPoll)
	defer tick.Stop()
	for {
		select {
		case v := <-verdicts:
			return b.verdictAnswer(ctx, id, v, input), nil
		case <-tick.C:
			if r, err := b.channel.approvals.Get(ctx, b.name, id); err == nil && r.Verdict != "" {
				return b.verdictAnswer(ctx, id, r.Verdict, input), nil
			}
		case <-ctx.Done():
			// The run is gone (/stop, its end): its prompt closes on every
			// approver's phone, as a channel session's does when it ends.
			ended, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := b.channel.approvals.SessionEnded(ended, b.name, id); err != nil {
				b.log.Warn("the prompt of a call no run waits for stays open until it expires", "request_id", id, "err", err)
			}
			cancel()
			return permissionAnswer(approval.Deny, nil, "the run ended before an approver answered"), nil
		}
	}
}

// verdictAnswer is the answer for request id's verdict v.
func (b *Butler) verdictAnswer(ctx context.Context, id, v string, input map[string]any) *mcp.CallToolResult {
	b.log.InfoContext(ctx, "permission verdict given to the run", "request_id", id, "behavior", v)
	switch v {
	case approval.Allow, approval.Session:
		return permissionAnswer(approval.Allow, input, "")
	case approval.Expired:
		return permissionAnswer(approval.Deny, nil, "nobody answered the permission prompt in time, so the call was not allowed")
	case approval.Ended:
		return permissionAnswer(approval.Deny, nil, "the permission prompt was closed unanswered")
	}
	who := ""
	if r, err := b.channel.approvals.Get(ctx, b.name, id); err == nil && r.AnsweredBy != "" {
		who = " by " + r.AnsweredBy
	}
	return permissionAnswer(approval.Deny, nil, "denied"+who+" through Herald")
}

// permissionAnswer is Claude Code's permission answer.
func permissionAnswer(behavior string, input map[string]any, message string) *mcp.CallToolResult {
	a := map[string]any{"behavior": behavior}
	if behavior == approval.Allow {
		if input == nil {
			input = map[string]any{}
		}
		a["updatedInput"] = input
	} else {
		a["message"] = message
	}
	out, _ := json.Marshal(a)
	return mcp.NewToolResultText(string(out))
}

// describeCall is what an approver reads of a call: its description, if
// it gave one, and its command, or its whole input.
func describeCall(input map[string]any) (description, preview string) {
	description, _ = input["description"].(string)
	if cmd, ok := input["command"].(string); ok {
		return description, cmd
	}
	b, _ := json.MarshalIndent(input, "", "  ")
	return description, string(b)
}

// newPromptID is a fresh permission request id, of the shape clients use.
func newPromptID() string { return approval.NewQuestionID()[1:6] }

// expectVerdict makes a channel the verdict of request id goes to, for an
// approve call waiting on it.
func (c *channelSide) expectVerdict(id string) chan string {
	ch := make(chan string, 1)
	c.mu.Lock()
	c.verdicts[id] = ch
	c.mu.Unlock()
	return ch
}

func (c *channelSide) forgetVerdict(id string) {
	c.mu.Lock()
	delete(c.verdicts, id)
	c.mu.Unlock()
}

// answerWaiting gives verdict behavior to the approve call waiting for
// request id, if one is.
func (c *channelSide) answerWaiting(id, behavior string) bool {
	c.mu.Lock()
	ch, ok := c.verdicts[id]
	c.mu.Unlock()
	if ok {
		select {
		case ch <- behavior:
		default:
		}
	}
	return ok
}
