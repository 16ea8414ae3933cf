package claude

// Wait waits for the process to end and returns nil if it exited with
// status 0, else its *ExitError (Stopped when Close signalled it).
func (s *Session) Wait() error {
	<-s.exited
	return s.waitErr
}

// Done is closed once the process has ended and its output is read.
func (s *Session) Done() <-chan struct{} { return s.exited }
