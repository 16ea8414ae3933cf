package claude

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"
)

// MaxLineBytes bounds one line of output (tool results can be long); a
// longer line is skipped and reported as a BadLine with ErrLineTooLong.
const MaxLineBytes = 16 << 20

// readLines reads r to its end, handing emit the event of each non-blank
// line. A line over max bytes costs no more than max bytes of memory. It
// returns nil at EOF.
func readLines(r io.Reader, max int, emit func(Event)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		line    []byte
		n       int  // bytes of the current line, newline included
		tooLong bool // past max: only its start is kept, for the excerpt
	)
	for {
		chunk, err := br.ReadSlice('\n')
		n += len(chunk)
		switch {
		case tooLong:
		case n > max+1: // +1: the newline
			tooLong = true
			keep := min(len(line), ExcerptBytes+utf8.UTFMax)
			line = append([]byte(nil), line[:keep]...)
			line = append(line, chunk[:min(len(chunk), ExcerptBytes+utf8.UTFMax-keep)]...)
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !tooLong && len(bytes.TrimSuffix(line, []byte("\n"))) > max {
			tooLong = true // a last line without its newline
		}
		if n > 0 {
			if tooLong {
				emit(&BadLine{Excerpt: excerpt(bytes.TrimSpace(line)), Len: n,
					Err: fmt.Errorf("%w: %d bytes, more than %d", ErrLineTooLong, n, max)})
			} else if t := bytes.TrimSpace(line); len(t) > 0 {
				emit(Decode(t))
			}
		}
		if cap(line) > 1<<20 {
			line = nil // let one huge line's buffer go
		}
		line, n, tooLong = line[:0], 0, false
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
