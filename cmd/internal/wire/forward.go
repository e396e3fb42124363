package wire

import (
	"context"
	"crypto/ed25519"
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
	holderID, frontID, err := wireKeyrings()
	if err != nil {
		_ = ln.Close()
		stopCat()
		return nil, nil, err
	}
	holder, err := mcpserve.New(cat, mcpserve.Options{Logger: quiet(), Stateless: true,
		Fleet: &mcpserve.Fleet{Peers: onePeer(""), Identity: holderID, Token: fleetToken, Advertise: endpoint}})
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
			Fleet: &mcpserve.Fleet{Peers: onePeer(endpoint), Identity: frontID, Token: fleetToken}})
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

// wireKeyrings are the keyrings of livereg-forward's two replicas, each
// with a fresh key, each believing the other.
func wireKeyrings() (holder, front *mcpserve.Keyring, err error) {
	hPub, hKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, nil, err
	}
	fPub, fKey, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, nil, err
	}
	peers := map[string]ed25519.PublicKey{"holder": hPub, "front": fPub}
	if holder, err = mcpserve.NewKeyring("holder", hKey, peers); err != nil {
		return nil, nil, err
	}
	front, err = mcpserve.NewKeyring("front", fKey, peers)
	return holder, front, err
}
