// Package guard keeps webhook deliveries from reaching internal networks
// (server-side request forgery): a dialer that refuses, at connect time,
// connections to addresses that are not on the public internet — loopback,
// private networks, link-local addresses such as the cloud metadata service
// 169.254.169.254, and the other special-purpose ranges listed in Rules.
//
// The check runs in net.Dialer.ControlContext, on the address the socket is
// about to connect to, after name resolution: a name that resolves to a
// public address when an endpoint is registered and to 127.0.0.1 when it is
// called (DNS rebinding) is refused all the same, and so is a redirect to a
// private address, whatever client follows it. A refused connection fails
// with an error matching ErrBlocked, whose message names the address and
// the rule and never the URL:
//
//	169.254.169.254 is link-local (cloud metadata): refused; allow it with --allow-private-endpoints or an allowlist
//
// Config.AllowPrivate opens the ranges an internal endpoint may use
// (loopback, private, link-local, shared, unique local...); Config.Allow
// opens chosen prefixes only, and may open any range.
//
// The Transport and Client of a Guard use no proxy, whatever HTTP_PROXY
// says: through a proxy the guard would only see the proxy's address, and
// the proxy would connect wherever the URL points. Whoever sets a proxy on
// the Transport takes that on.
package guard
