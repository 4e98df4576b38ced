package sink

import (
	"net/url"
	"slices"
	"strings"
)

// minSecretLen is the length of the shortest text Describe returns as a
// secret: shorter texts are no secret, and replacing them would garble the
// text they are hidden in.
const minSecretLen = 4

// Describe describes rawURL, a sink URL of one of kinds, for what others
// read (the relays' presence table): its kind's Describe (see
// URLKind.Describe), which never shows a credential. It returns with it
// every text that must never be shown there: the kind's secrets, the
// password of the URL's user information, o's Password (a broker's given
// apart from its URL) and o's Secrets (a webhook's signing keys), but
// those shorter than 4 bytes.
func Describe(kinds []URLKind, rawURL string, o URLOptions) (desc string, secrets []string) {
	secrets = append(slices.Clone(o.Secrets), o.Password)
	desc = "a sink URL that does not parse"
	if k, u, err := Lookup(kinds, rawURL); err == nil {
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p)
		}
		describe := k.Describe
		if describe == nil {
			describe = func(u *url.URL) (string, []string) { return DescribeQuery(u, k.Name+" "+u.Scheme+"://"+u.Host) }
		}
		var more []string
		desc, more = describe(u)
		secrets = append(secrets, more...)
	}
	return desc, slices.DeleteFunc(secrets, func(s string) bool { return len(s) < minSecretLen })
}

// DescribeQuery is the part of a URLKind's Describe that reads u's query:
// desc followed by the parameters named public (those that name the
// destination: a subject, a topic) as " key=value", in the order of their
// names; and as secrets, the value of every other parameter, which may
// hold a credential, and the whole raw query.
func DescribeQuery(u *url.URL, desc string, public ...string) (string, []string) {
	var secrets []string
	query := u.Query()
	keys := make([]string, 0, len(query))
	for key := range query {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	var shown strings.Builder
	shown.WriteString(desc)
	for _, key := range keys {
		for _, v := range query[key] {
			switch {
			case slices.Contains(public, key):
				shown.WriteString(" " + key + "=" + v)
			case v != "":
				secrets = append(secrets, v)
			}
		}
	}
	if u.RawQuery != "" {
		secrets = append(secrets, u.RawQuery)
	}
	return shown.String(), secrets
}
