package wire

import (
	"context"
	"errors"
	"net"
	"net/http"

	"github.com/livereg/livereg/catalog"
	"github.com/livereg/livereg/mcpserve"
)

// fleetToken is the fleet credential of livereg-forward's two replicas.
const fleetToken = "wirebench-fleet-token-0123456789"

// onePeer places every tool on one replica.
type onePeer string

func (p onePeer) Peer(kind catalog.Kind, _ string) (string, bool) {
	return string(p), kind == catalog.KindTool
}

// liveregForward is livereg-forward: two stateless mcpserve replicas in
// one process, the one the client calls holding nothing and forwarding
// every call to the other, which holds echo and serves its fleet
// endpoint on a loopback port of its own. Against livereg-stateless, it
// measures what the fleet hop adds to a call.
func liveregForward() (http.Handler, func(), error) {
	cat, stopCat, err := liveregCatalog(1)
	if err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		stopCat()
		return nil, nil, err
	}
	endpoint := "http://" + ln.Addr().String() + mcpserve.DefaultFleetPath
	holder, err := mcpserve.New(cat, mcpserve.Options{Logger: quiet(), Stateless: true,
		Fleet: &mcpserve.Fleet{Peers: onePeer(""), Token: fleetToken, Advertise: endpoint}})
	if err != nil {
		_ = ln.Close()
		stopCat()
		return nil, nil, err
	}
	hs := &http.Server{Handler: holder.FleetHandler()}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	empty, err := catalog.New(catalog.Config{})
	if err == nil {
		var front *mcpserve.Server
		front, err = mcpserve.New(empty, mcpserve.Options{Logger: quiet(), Stateless: true,
			Fleet: &mcpserve.Fleet{Peers: onePeer(endpoint), Token: fleetToken}})
		if err == nil {
			return front.Handler(), func() {
				_ = front.Close()
				_ = hs.Shutdown(context.Background())
				<-served
				_ = holder.Close()
				stopCat()
			}, nil
		}
	}
	_ = hs.Close()
	if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	_ = holder.Close()
	stopCat()
	return nil, nil, err
}
