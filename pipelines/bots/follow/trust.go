package follow

import (
	"bytes"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/emersion/go-msgauth/authres"
	"github.com/emersion/go-msgauth/dkim"

	"github.com/patcheval/patcheval/mbox"
)

// Who sent a #patcheval command: a mail's From: is whatever its sender
// typed, so a command is taken only as far as the list's trust policy
// (List.Trust, config key trust) lets its From: be believed:
//
//	"dkim" (default)  a DKIM signature of the message verifies (RFC 6376:
//	                  go-msgauth's verifier, the key from DNS TXT
//	                  <selector>._domainkey.<d>; a body length tag l= is
//	                  refused) and its d= is the From: address's domain or
//	                  a parent of it (relaxed alignment, as DMARC's)
//	"arc"             as "dkim", or else the list's own verdict: the
//	                  ARC-Authentication-Results of the highest ARC
//	                  instance, with the authserv-id the list's
//	                  arc_authserv_id, says dkim=pass for an aligned
//	                  header.d (or dmarc=pass for the From: domain). The
//	                  ARC seals themselves are not verified: the list
//	                  must be one whose archive only it writes
//	"any"             From: as written (lists that authenticate their
//	                  posters themselves; the behaviour before policies)
//
// A message with several From: fields is never trusted (a signature
// covers one of them). Then the sender's role decides
// (permitted).

// Trust policies.
const (
	TrustDKIM = "dkim"
	TrustARC  = "arc"
	TrustAny  = "any"
)

// trustOf is l's policy (an unset one: TrustDKIM).
func trustOf(l List) string {
	if l.Trust == "" {
		return TrustDKIM
	}
	return l.Trust
}

// authenticate says how m's From: is vouched for under l's policy ("dkim
// d=example.org", "arc lists.example.org", "any"), or why it is not
// (refused != "").
func (f *Follower) authenticate(l List, m *mbox.Message) (how, refused string) {
	policy := trustOf(l)
	if policy == TrustAny {
		return TrustAny, ""
	}
	if n := len(m.Header["From"]); n != 1 {
		return "", fmt.Sprintf("the message has %d From: fields", n)
	}
	_, dom, ok := strings.Cut(strings.ToLower(m.From.Email), "@")
	if !ok || dom == "" {
		return "", "From: has no domain"
	}
	how, why := f.dkimPass(m.Raw, dom)
	if how != "" || policy != TrustARC {
		return how, why
	}
	how, arcWhy := arcPass(m, l.ARCAuthServID, dom)
	if how != "" {
		return how, ""
	}
	return "", why + "; " + arcWhy
}

// dkimPass verifies raw's DKIM signatures: how names the first that
// passes for an aligned domain; why says what failed otherwise.
func (f *Follower) dkimPass(raw []byte, fromDomain string) (how, why string) {
	lookup := f.LookupTXT
	if lookup == nil {
		lookup = net.LookupTXT
	}
	vs, err := dkim.VerifyWithOptions(bytes.NewReader(raw), &dkim.VerifyOptions{LookupTXT: lookup, MaxVerifications: 8})
	if err != nil && len(vs) == 0 {
		return "", "DKIM: " + err.Error()
	}
	if len(vs) == 0 {
		return "", "no DKIM signature"
	}
	var fails []string
	for _, v := range vs {
		d := strings.ToLower(v.Domain)
		switch {
		case v.Err != nil:
			fails = append(fails, fmt.Sprintf("d=%s: %v", d, v.Err))
		case !aligned(fromDomain, d):
			fails = append(fails, fmt.Sprintf("d=%s passes but is not From:'s domain %s", d, fromDomain))
		default:
			return "dkim d=" + d, ""
		}
	}
	return "", "no DKIM signature passes for From:'s domain (" + strings.Join(fails, "; ") + ")"
}

// aligned says whether a signature of domain d vouches for an address
// at fromDomain: the same domain or a parent of it.
func aligned(fromDomain, d string) bool {
	d = strings.TrimSuffix(d, ".")
	return d != "" && strings.Contains(d, ".") && (fromDomain == d || strings.HasSuffix(fromDomain, "."+d))
}

// arcPass reads the list's verdict in m's ARC-Authentication-Results:
// only the highest instance counts, and only with the list's authserv-id.
func arcPass(m *mbox.Message, authservID, fromDomain string) (how, why string) {
	if authservID == "" {
		return "", "no arc_authserv_id set for the list"
	}
	best, count, value := 0, 0, ""
	for _, v := range m.Header["Arc-Authentication-Results"] {
		inst, rest, ok := strings.Cut(v, ";")
		k, n, ok2 := strings.Cut(strings.TrimSpace(inst), "=")
		i, err := strconv.Atoi(strings.TrimSpace(n))
		if !ok || !ok2 || strings.TrimSpace(k) != "i" || err != nil || i < 1 {
			return "", "an ARC-Authentication-Results field without an instance"
		}
		switch {
		case i > best:
			best, count, value = i, 1, rest
		case i == best:
			count++
		}
	}
	switch {
	case best == 0:
		return "", "no ARC-Authentication-Results"
	case count > 1:
		return "", fmt.Sprintf("%d ARC-Authentication-Results of instance %d", count, best)
	}
	id, results, err := authres.Parse(value)
	if err != nil {
		return "", fmt.Sprintf("ARC-Authentication-Results i=%d: %v", best, err)
	}
	if !strings.EqualFold(id, authservID) {
		return "", fmt.Sprintf("the last ARC-Authentication-Results (i=%d) is %s's, not the list's %s", best, id, authservID)
	}
	for _, r := range results {
		switch r := r.(type) {
		case *authres.DKIMResult:
			if r.Value == authres.ResultPass && aligned(fromDomain, strings.ToLower(r.Domain)) {
				return fmt.Sprintf("arc %s i=%d dkim header.d=%s", id, best, strings.ToLower(r.Domain)), ""
			}
		case *authres.DMARCResult:
			if r.Value == authres.ResultPass && strings.EqualFold(r.From, fromDomain) {
				return fmt.Sprintf("arc %s i=%d dmarc header.from=%s", id, best, fromDomain), ""
			}
		}
	}
	return "", fmt.Sprintf("%s's ARC-Authentication-Results (i=%d) has no dkim or dmarc pass for %s", id, best, fromDomain)
}
