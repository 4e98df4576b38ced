package guard

import (
	"net/netip"
	"slices"
)

// Rule is one range the guard refuses.
type Rule struct {
	// Prefix is the range.
	Prefix netip.Prefix
	// Name says what the range is, as refusals print it: "loopback",
	// "private (RFC 1918)".
	Name string
	// Private is whether Config.AllowPrivate opens the range: true for
	// ranges an internal endpoint may live in, false for addresses no HTTP
	// server has (unspecified, multicast, broadcast), which only an Allow
	// prefix opens.
	Private bool
}

// Rules returns the ranges a Guard refuses, from the IANA IPv4 and IPv6
// special-purpose address registries (RFC 6890 and successors), most
// specific first. Addresses that embed an IPv4 address for the IPv4
// internet — IPv4-mapped ::ffff:0:0/96 and NAT64 64:ff9b::/96 — are judged
// by that IPv4 address instead. Every IPv6 address outside global unicast
// 2000::/3 is refused as well, as "reserved".
func Rules() []Rule { return slices.Clone(rules) }

var rules = []Rule{
	// IPv4.
	{p("0.0.0.0/8"), "unspecified (\"this network\"; 0.0.0.0 reaches the local host)", false},
	{p("10.0.0.0/8"), "private (RFC 1918)", true},
	{p("100.64.0.0/10"), "shared address space (carrier-grade NAT, RFC 6598)", true},
	{p("127.0.0.0/8"), "loopback", true},
	{p("169.254.0.0/16"), "link-local", true},
	{p("172.16.0.0/12"), "private (RFC 1918)", true},
	{p("192.0.0.0/24"), "IETF protocol assignments (RFC 6890)", true},
	{p("192.0.2.0/24"), "documentation (TEST-NET-1)", true},
	{p("192.88.99.0/24"), "6to4 relay anycast (deprecated)", true},
	{p("192.168.0.0/16"), "private (RFC 1918)", true},
	{p("198.18.0.0/15"), "benchmarking (RFC 2544)", true},
	{p("198.51.100.0/24"), "documentation (TEST-NET-2)", true},
	{p("203.0.113.0/24"), "documentation (TEST-NET-3)", true},
	{p("224.0.0.0/4"), "multicast", false},
	{p("255.255.255.255/32"), "broadcast", false},
	{p("240.0.0.0/4"), "reserved (class E)", true},

	// IPv6.
	{p("::/128"), "unspecified", false},
	{p("::1/128"), "loopback", true},
	{p("::/96"), "IPv4-compatible (deprecated)", true},
	{p("64:ff9b:1::/48"), "local-use NAT64 (RFC 8215)", true},
	{p("100::/64"), "discard-only (RFC 6666)", true},
	{p("2001::/32"), "Teredo (tunnels to an IPv4 address)", true},
	{p("2001:2::/48"), "benchmarking (RFC 5180)", true},
	{p("2001:db8::/32"), "documentation", true},
	{p("2002::/16"), "6to4 (tunnels to an IPv4 address)", true},
	{p("3fff::/20"), "documentation (RFC 9637)", true},
	{p("5f00::/16"), "segment routing SIDs (RFC 9602)", true},
	{p("fc00::/7"), "unique local (ULA)", true},
	{p("fe80::/10"), "link-local", true},
	{p("fec0::/10"), "site-local (deprecated)", true},
	{p("ff00::/8"), "multicast", false},
}

// globalUnicast is where every routable IPv6 address lies; any other IPv6
// address is reserved.
var globalUnicast = p("2000::/3")

// Prefixes whose addresses carry an IPv4 address in their last 32 bits.
var (
	ipv4Mapped = p("::ffff:0:0/96")
	nat64      = p("64:ff9b::/96")
)

// cloudMetadata are the addresses of cloud providers' instance metadata
// services, which hand out credentials: refusals name them.
var cloudMetadata = map[netip.Addr]bool{
	netip.MustParseAddr("169.254.169.254"): true, // AWS, GCP, Azure, DigitalOcean, OpenStack...
	netip.MustParseAddr("169.254.170.2"):   true, // AWS ECS task metadata
	netip.MustParseAddr("fd00:ec2::254"):   true, // AWS IPv6
	netip.MustParseAddr("100.100.100.200"): true, // Alibaba Cloud
	netip.MustParseAddr("192.0.0.192"):     true, // Oracle Cloud
}

func p(s string) netip.Prefix { return netip.MustParsePrefix(s) }
