package claude

import "syscall"

// stopWithParent has Linux end the session (SIGTERM) when the process that
// started it dies, SIGKILL included: otherwise Claude Code goes on with
// its turn, tools and all, while the conversation's next run resumes the
// same session beside it. (Linux signals it when the starting thread
// exits; Go keeps its threads for the process's life.)
func stopWithParent(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGTERM }
