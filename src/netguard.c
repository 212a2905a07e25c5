/* netguard.c: the addresses a callback or report webhook may reach: public ones, and those api.callbacks.allow names. */
#include "spur.h"
#include "netguard.h"

#include <sys/socket.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An address as 16 bytes: IPv4 as ::ffff:a.b.c.d, so one prefix compare fits both. */
struct netaddr {
	uint8_t	b[16];
};

static const uint8_t mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

/* Not public: each an IPv6 prefix; the IPv4 ones are under ::ffff:0:0/96. */
static const struct {
	const char	*net;
	int		 bits;
} netguard_closed[] = {
	{ "0.0.0.0", 8 },		/* "this network" */
	{ "10.0.0.0", 8 },		/* private */
	{ "100.64.0.0", 10 },		/* carrier-grade NAT */
	{ "127.0.0.0", 8 },		/* loopback */
	{ "169.254.0.0", 16 },		/* link-local, cloud metadata (169.254.169.254) */
	{ "172.16.0.0", 12 },		/* private */
	{ "192.0.0.0", 24 },		/* protocol assignments */
	{ "192.168.0.0", 16 },		/* private */
	{ "198.18.0.0", 15 },		/* benchmarking */
	{ "224.0.0.0", 4 },		/* multicast */
	{ "240.0.0.0", 4 },		/* reserved, broadcast */
	{ "::", 128 },
	{ "::1", 128 },
	{ "fc00::", 7 },		/* unique local, AWS's metadata fd00:ec2::254 */
	{ "fe80::", 10 },		/* link-local */
	{ "ff00::", 8 },		/* multicast */
};

static int
netaddr_parse(const char *s, struct netaddr *a, int *bits)
{
	struct in_addr	 a4;

	if (inet_pton(AF_INET, s, &a4) == 1) {
		memcpy(a->b, mapped, 12);
		memcpy(a->b + 12, &a4, 4);
		*bits = 96 + 32;
		return 4;
	}
	if (inet_pton(AF_INET6, s, a->b) == 1) {
		*bits = 128;
		return 6;
	}
	return 0;
}

/* "addr" or "addr/bits" into a prefix; -1: neither. */
static int
netrange_parse(const char *s, struct netaddr *a, int *bits)
{
	char	*copy = xstrdup(s), *slash, *end;
	long	 n;
	int	 family, max;

	if ((slash = strchr(copy, '/')) != NULL)
		*slash++ = '\0';
	if ((family = netaddr_parse(copy, a, &max)) == 0) {
		free(copy);
		return -1;
	}
	if (slash != NULL) {
		n = strtol(slash, &end, 10);
		if (*slash == '\0' || *end != '\0' || n < 0 || n > (family == 4 ? 32 : 128)) {
			free(copy);
			return -1;
		}
		*bits = (int)n + (family == 4 ? 96 : 0);
	} else
		*bits = max;
	free(copy);
	return 0;
}

static int
netaddr_in(const struct netaddr *a, const struct netaddr *net, int bits)
{
	int	 full = bits / 8, rest = bits % 8;

	if (memcmp(a->b, net->b, (size_t)full) != 0)
		return 0;
	return rest == 0 || ((a->b[full] ^ net->b[full]) & (0xff << (8 - rest))) == 0;
}

static int
netaddr_public(const struct netaddr *a)
{
	struct netaddr	 net, v4;
	size_t		 i;
	int		 bits;

	/* NAT64 (64:ff9b::/96) and IPv4-compatible addresses carry an IPv4 one. */
	if ((memcmp(a->b, "\x00\x64\xff\x9b\0\0\0\0\0\0\0\0", 12) == 0 ||
	    (memcmp(a->b, mapped, 10) == 0 && a->b[10] == 0 && a->b[11] == 0 &&
	    memcmp(a->b + 12, "\0\0\0", 3) != 0))) {
		memcpy(v4.b, mapped, 12);
		memcpy(v4.b + 12, a->b + 12, 4);
		a = &v4;
	}
	for (i = 0; i < SPUR_ARRLEN(netguard_closed); i++) {
		if (netrange_parse(netguard_closed[i].net, &net, &bits) != 0)
			fatal("netguard: bad range %s", netguard_closed[i].net);
		if (memcmp(net.b, mapped, 12) == 0 && bits == 128)
			bits = 96 + netguard_closed[i].bits;
		else
			bits = netguard_closed[i].bits;
		if (netaddr_in(a, &net, bits))
			return 0;
	}
	return 1;
}

int
netguard_valid(const char *s)
{
	struct netaddr	 a;
	int		 bits;

	return netrange_parse(s, &a, &bits) == 0;
}

/* Whether a is inside one of list's addresses and CIDRs (NULL-terminated, may be NULL). */
static int
netaddr_listed(const struct netaddr *a, char *const *list)
{
	struct netaddr	 net;
	int		 bits;
	size_t		 i;

	for (i = 0; list != NULL && list[i] != NULL; i++) {
		if (netrange_parse(list[i], &net, &bits) == 0 && netaddr_in(a, &net, bits))
			return 1;
	}
	return 0;
}

int
netguard_listed(const char *addr, char *const *list)
{
	struct netaddr	 a;
	int		 bits;

	return addr != NULL && strchr(addr, '/') == NULL &&
	    netrange_parse(addr, &a, &bits) == 0 && netaddr_listed(&a, list);
}

int
netguard_allowed(const struct sockaddr *sa, char *const *allow)
{
	struct netaddr	 a;

	if (sa->sa_family == AF_INET) {
		memcpy(a.b, mapped, 12);
		memcpy(a.b + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6)
		memcpy(a.b, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	else
		return 0;
	return netaddr_public(&a) || netaddr_listed(&a, allow);
}
