/* netguard.h: which addresses a callback or report webhook may connect to (SPEC 12), and which are listed. */
#ifndef SPUR_NETGUARD_H
#define SPUR_NETGUARD_H

struct sockaddr;

/* Whether s is an address or CIDR ("127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"). */
int	netguard_valid(const char *s);
/*
 * Whether the engine may connect to sa: a public address, or one that allow
 * (NULL-terminated addresses and CIDRs, may be NULL) names. Loopback,
 * private, link-local, cloud-metadata, CGNAT, multicast and reserved
 * addresses are not public, nor is an IPv4 one inside an IPv6 one of them.
 */
int	netguard_allowed(const struct sockaddr *sa, char *const *allow);
/* Whether addr (an address as text, no CIDR) is one list's addresses and CIDRs name. */
int	netguard_listed(const char *addr, char *const *list);

#endif
