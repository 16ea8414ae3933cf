package deliver_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/heraldhq/herald/services/messenger/deliver"
)

// TestSendChunks: a retry sends only the chunks an earlier attempt did not,
// each is reported as it is accepted, and an error says which chunk failed
// unless it came before the call.
func TestSendChunks(t *testing.T) {
	errTurn := errors.New("no turn")
	errSend := errors.New("refused")
	tests := []struct {
		name    string
		done    []string
		turn    error // of the turn before the second chunk sent
		send    error // of the third chunk's send
		wantIDs []string
		wantErr string
		wantRec []string // reported through Sent
	}{
		{name: "all", wantIDs: []string{"m0", "m1", "m2"}, wantRec: []string{"m0", "m1", "m2"}},
		{name: "retry skips what was sent", done: []string{"m0"}, wantIDs: []string{"m0", "m1", "m2"}, wantRec: []string{"m1", "m2"}},
		{name: "send error names its chunk", send: errSend, wantIDs: []string{"m0", "m1"}, wantErr: "chunk 3 of 3: refused", wantRec: []string{"m0", "m1"}},
		{name: "turn error as it is", turn: errTurn, wantIDs: []string{"m0"}, wantErr: "no turn", wantRec: []string{"m0"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var rec []string
			turns := 0
			d := deliver.Delivery{Done: tc.done, Sent: func(id string) error { rec = append(rec, id); return nil }}
			r, err := d.SendChunks(3, func() error {
				if turns++; turns == 2 {
					return tc.turn
				}
				return nil
			}, func(i int) (string, error) {
				if i == 2 && tc.send != nil {
					return "", tc.send
				}
				return fmt.Sprintf("m%d", i), nil
			})
			if got := fmt.Sprint(err); (tc.wantErr == "" && err != nil) || (tc.wantErr != "" && got != tc.wantErr) {
				t.Errorf("error = %v, want %q", err, tc.wantErr)
			}
			if !slices.Equal(r.MessageIDs, tc.wantIDs) {
				t.Errorf("receipt = %v, want %v", r.MessageIDs, tc.wantIDs)
			}
			if !slices.Equal(rec, tc.wantRec) {
				t.Errorf("reported = %v, want %v", rec, tc.wantRec)
			}
		})
	}
}

// TestSentOneRecordingFails: a message acted on whose progress cannot be
// recorded is still named in the receipt, and the error says which.
func TestSentOneRecordingFails(t *testing.T) {
	d := deliver.Delivery{Sent: func(string) error { return errors.New("ledger down") }}
	r, err := d.SentOne("42", "reaction on message")
	if want := "recording reaction on message 42: ledger down"; fmt.Sprint(err) != want {
		t.Errorf("error = %v, want %q", err, want)
	}
	if !slices.Equal(r.MessageIDs, []string{"42"}) {
		t.Errorf("receipt = %v, want [42]", r.MessageIDs)
	}
}
