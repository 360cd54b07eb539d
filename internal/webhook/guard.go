package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// ErrBlockedAddress reports a hook URL whose host resolves to an address
// the policy refuses: loopback, link-local (cloud metadata among them),
// private, CGNAT, unspecified, multicast, or an IPv6 address that embeds
// an IPv4 one (6to4, NAT64, Teredo, IPv4-compatible). A hook could otherwise make
// a ghost node fetch its own admin endpoints or the cloud's metadata
// service for anyone who may add a hook (server-side request forgery).
var ErrBlockedAddress = errors.New("webhook address refused")

// Policy says which addresses deliveries may connect to.
type Policy struct {
	// AllowPrivate lets deliveries reach every address: for closed
	// networks and tests (serve --webhook-allow-private).
	AllowPrivate bool
	// Allow lists networks that are reachable even though the default
	// policy refuses them (an internal CI server, say).
	Allow []netip.Prefix
}

// blocked are the networks refused by default, beyond what netip's
// predicates name: CGNAT, the IETF protocol assignments, benchmarking,
// the reserved class E, and every IPv6 form that carries an IPv4
// address inside it, which could otherwise smuggle any refused IPv4
// address (10.0.0.1, 169.254.169.254) past a check that reads only the
// IPv6 address: NAT64's well-known and local prefixes, 6to4, Teredo,
// IPv4-compatible and IPv4-translated addresses. IPv4-mapped addresses
// (::ffff:a.b.c.d) are unmapped and checked as the IPv4 address they
// are. These forms are refused whole, public IPv4 inside or not: 6to4
// and Teredo are deprecated relays, and an operator who needs one lists
// it in Policy.Allow.
var blocked = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),    // NAT64, well-known
	netip.MustParsePrefix("64:ff9b:1::/48"),  // NAT64, local use
	netip.MustParsePrefix("2002::/16"),       // 6to4
	netip.MustParsePrefix("2001::/32"),       // Teredo
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (SIIT)
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
}

// Check returns nil if a delivery may connect to addr, and an error
// matching ErrBlockedAddress if not.
func (p Policy) Check(addr netip.Addr) error {
	addr = addr.Unmap()
	if p.AllowPrivate {
		return nil
	}
	for _, n := range p.Allow {
		if n.Contains(addr) {
			return nil
		}
	}
	refuse := !addr.IsValid() || addr.IsLoopback() || addr.IsPrivate() || addr.IsLinkLocalUnicast() ||
		addr.IsLinkLocalMulticast() || addr.IsInterfaceLocalMulticast() || addr.IsMulticast() ||
		addr.IsUnspecified() || addr == netip.AddrFrom4([4]byte{255, 255, 255, 255})
	for _, n := range blocked {
		refuse = refuse || n.Contains(addr)
	}
	if refuse {
		return fmt.Errorf("%w: %s is a loopback, link-local, private or reserved address (allow it with --webhook-allow-private)", ErrBlockedAddress, addr)
	}
	return nil
}

// Dialer opens connections; *net.Dialer is one. Tests inject one that
// fails if asked for any address but 127.0.0.1.
type Dialer interface {
	DialContext(ctx context.Context, network, address string) (net.Conn, error)
}

// Resolver turns a host name into addresses; *net.Resolver is one.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// guardedDialer resolves the host itself, checks every address it would
// connect to against the policy, and dials the checked address literally,
// so a DNS answer that changes between the check and the connection
// (rebinding) cannot slip a refused address through.
type guardedDialer struct {
	policy   Policy
	dialer   Dialer
	resolver Resolver
}

func (g guardedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, portStr, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("webhook: %w", err)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil, fmt.Errorf("webhook: port %q: %w", portStr, err)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else if addrs, err = g.resolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil, fmt.Errorf("webhook: resolve %s: %w", host, err)
	}
	var errs []error
	for _, a := range addrs {
		if err := g.policy.Check(a); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", host, err))
			continue
		}
		conn, err := g.dialer.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("webhook: %s resolves to no address", host)
	}
	return nil, errors.Join(errs...)
}
