package envelope_test

import (
	"fmt"

	"github.com/heraldhq/herald/pkg/envelope"
	"github.com/heraldhq/herald/schemas"
)

func ExampleValidate() {
	n := envelope.NewNotify("health", envelope.Delivery{Intent: "reply", Channel: "telegram", Message: "Done."}, nil)
	err := envelope.Check(schemas.Notify, n)
	fmt.Println(err)
	// Output: invalid notify.v1: /request_context: is required
}

func ExampleRoute_IdempotencyKey() {
	r := envelope.NewRoute(envelope.NewNotify("health", envelope.Delivery{Message: "Backup finished."}, nil))
	// Publishing the same route again carries the same key, so it is one delivery.
	fmt.Println(len(r.IdempotencyKey()), envelope.DeliveryID(r.IdempotencyKey())[:4])
	// Output: 64 dlv_
}
