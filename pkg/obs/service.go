package obs

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
)

// Version is Herald's version, as its services report it (discovery, MCP).
const Version = "0.1.0"

// Names of the fleet's NATS micro services (design §9): `nats micro ls`, or a
// request on $SRV.PING, lists every running part.
const (
	ServiceSwitchboard = "herald-switchboard"
	ServiceMessenger   = "herald-messenger"
)

// ServiceButler is the micro service name of butler name.
func ServiceButler(name string) string { return "herald-butler-" + name }

// StatusEndpoint is the name of each service's status endpoint.
const StatusEndpoint = "status"

// StatusSubject is where service answers status requests:
// herald.status.switchboard, herald.status.messenger,
// herald.status.butler-<name>. Every instance answers (no queue group), so
// a request gets the first and a scatter-gather gets every replica.
func StatusSubject(service string) string {
	return "herald.status." + strings.TrimPrefix(service, "herald-")
}

// AddService registers name as a NATS micro service on nc: it answers
// $SRV.PING, $SRV.INFO and $SRV.STATS (for all services, for name, and for
// its instance id), and its status endpoint with status() as JSON (the
// service's integrations, receivers, consumer lag, last error: what it
// chooses to say; never a secret). Stop the returned service when its work
// stops. The NATS user needs the subscriptions natsauth.Discovery grants.
func AddService(nc *nats.Conn, name, version string, status func() any) (micro.Service, error) {
	svc, err := micro.AddService(nc, micro.Config{
		Name:        name,
		Version:     version,
		Description: "Herald " + strings.TrimPrefix(name, "herald-"),
	})
	if err != nil {
		return nil, fmt.Errorf("micro service %s: %w", name, err)
	}
	handler := micro.HandlerFunc(func(req micro.Request) {
		b, err := json.Marshal(status())
		if err != nil {
			_ = req.Error("500", "encoding the status: "+err.Error(), nil)
			return
		}
		_ = req.Respond(b)
	})
	if err := svc.AddEndpoint(StatusEndpoint, handler, micro.WithEndpointSubject(StatusSubject(name)), micro.WithEndpointQueueGroupDisabled()); err != nil {
		_ = svc.Stop()
		return nil, fmt.Errorf("micro service %s: %w", name, err)
	}
	return svc, nil
}
