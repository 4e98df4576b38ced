// Package netfault injects network faults into TCP connections: a Proxy on
// 127.0.0.1 in front of one server (PostgreSQL, a broker, a webhook
// receiver) adds latency, resets connections in the middle of a stream,
// holds every byte in a black hole, leaves connections half-open, or
// refuses them. postbox chaos drives it against the relays it runs; tests
// use it to cut a store's or a sink's connections.
package netfault
