package token_test

import (
	"fmt"

	"github.com/heraldhq/herald/pkg/token"
)

// A butler finds a presented token's record by its id; the rest is secret.
func ExampleParseID() {
	id, ok := token.ParseID("hrt_9f86d081884c7d65_q1Xb2V7mZ0cK4r9sT3uW8yA5eD6fG2hJ1kL0nP7oR4s")
	fmt.Println(id, ok)
	_, ok = token.ParseID("Bearer hunter2")
	fmt.Println(ok)
	// Output:
	// 9f86d081884c7d65 true
	// false
}
