/* crypto.c: the one HMAC and hash helpers, hex and base64, constant-time comparison and random ids. */
#include "spur.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void
hmac_sha256(const void *key, size_t keylen, const void *msg, size_t msglen,
    unsigned char out[32])
{
	unsigned int	 outlen = 32;

	if (HMAC(EVP_sha256(), key, (int)keylen, msg, msglen, out, &outlen) == NULL)
		fatal("HMAC-SHA256 failed");
}

void
sha256(const void *msg, size_t len, unsigned char out[32])
{
	unsigned int	 outlen = 32;

	if (EVP_Digest(msg, len, out, &outlen, EVP_sha256(), NULL) != 1)
		fatal("SHA-256 failed");
}

/*
 * CRC-32C (Castagnoli), the payload log's record check: SSE4.2's instruction
 * where the CPU has it (about 1 µs for 12 KB), a table a byte at a time else.
 */
static uint32_t	crc32c_table[256];

static void
crc32c_init(void)
{
	uint32_t	 c;
	int		 i, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78U : c >> 1;
		crc32c_table[i] = c;
	}
}

static uint32_t
crc32c_soft(uint32_t c, const unsigned char *p, size_t n)
{
	static pthread_once_t	 once = PTHREAD_ONCE_INIT;

	pthread_once(&once, crc32c_init);
	while (n-- > 0)
		c = crc32c_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
crc32c_sse42(uint32_t c, const unsigned char *p, size_t n)
{
	uint64_t	 c64 = c, w;

	for (; n > 0 && ((uintptr_t)p & 7) != 0; n--)
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
	for (; n >= 8; n -= 8, p += 8) {
		memcpy(&w, p, 8);
		c64 = __builtin_ia32_crc32di(c64, w);
	}
	for (; n > 0; n--)
		c64 = __builtin_ia32_crc32qi((uint32_t)c64, *p++);
	return (uint32_t)c64;
}
#endif

uint32_t
crc32c(uint32_t crc, const void *data, size_t n)
{
	uint32_t	 c = ~crc;

#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc32c_sse42(c, data, n);
#endif
	return ~crc32c_soft(c, data, n);
}

void
hex_encode(const unsigned char *in, size_t n, char *out)
{
	static const char	 digits[] = "0123456789abcdef";
	size_t			 i;

	for (i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 0xf];
	}
	out[2 * n] = '\0';
}

int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes exactly outlen bytes from 2*outlen hex digits; -1 on any other shape. */
int
hex_decode(const char *s, size_t len, unsigned char *out, size_t outlen)
{
	size_t	 i;
	int	 hi, lo;

	if (len != 2 * outlen)
		return -1;
	for (i = 0; i < outlen; i++) {
		if ((hi = hex_value(s[2 * i])) < 0 || (lo = hex_value(s[2 * i + 1])) < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

char *
base64_encode(const unsigned char *in, size_t n)
{
	char	*out = xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	return out;
}

char *
base64url_encode(const unsigned char *p, size_t len)
{
	char	*s = base64_encode(p, len), *q, *w;

	for (q = w = s; *q != '\0'; q++) {
		if (*q == '=')
			continue;
		*w++ = *q == '+' ? '-' : *q == '/' ? '_' : *q;
	}
	*w = '\0';
	return s;
}

/* Decodes standard base64 (padding required when the length asks for it). */
int
base64_decode(const char *s, size_t len, unsigned char **out, size_t *outlen)
{
	unsigned char	*p;
	int		 n;
	size_t		 pad = 0;

	if (len % 4 != 0 || len > (size_t)1 << 30)
		return -1;
	p = xmalloc(len / 4 * 3 + 1);
	if ((n = EVP_DecodeBlock(p, (const unsigned char *)s, (int)len)) < 0) {
		free(p);
		return -1;
	}
	if (len >= 1 && s[len - 1] == '=')
		pad++;
	if (len >= 2 && s[len - 2] == '=')
		pad++;
	*out = p;
	*outlen = (size_t)n - pad;
	return 0;
}

int
ct_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}

void
random_bytes(void *p, size_t n)
{
	if (RAND_bytes(p, (int)n) != 1)
		fatal("RAND_bytes failed");
}

static const char	 id_alphabet[] = "0123456789abcdefghjkmnpqrstvwxyz";	/* ascending */

char *
random_id(const char *prefix)
{
	unsigned char		 r[20];
	char			 s[21];
	size_t			 i;

	random_bytes(r, sizeof r);
	for (i = 0; i < 20; i++)
		s[i] = id_alphabet[r[i] & 31];
	s[20] = '\0';
	return xprintf("%s%s", prefix, s);
}

char *
time_id(const char *prefix)
{
	uint64_t		 t = (uint64_t)now_ms();
	unsigned char		 r[10];
	char			 s[21];
	int			 i;

	/* 10 digits of the time in ms (50 bits), most significant first; then 50 random bits. */
	for (i = 9; i >= 0; i--) {
		s[i] = id_alphabet[t & 31];
		t >>= 5;
	}
	random_bytes(r, sizeof r);
	for (i = 0; i < 10; i++)
		s[10 + i] = id_alphabet[r[i] & 31];
	s[20] = '\0';
	return xprintf("%s%s", prefix, s);
}

/* Standard Webhooks' keys and signatures: source-webhook.c checks them, source-api.c signs. */
#define WEBHOOK_STD_PREFIX	"whsec_"

int
webhook_standard_key(const void *secret, size_t len, unsigned char **key, size_t *keylen)
{
	const char	*p = secret;

	*key = NULL;
	*keylen = 0;
	if (len >= strlen(WEBHOOK_STD_PREFIX) &&
	    memcmp(p, WEBHOOK_STD_PREFIX, strlen(WEBHOOK_STD_PREFIX)) == 0) {
		p += strlen(WEBHOOK_STD_PREFIX);
		len -= strlen(WEBHOOK_STD_PREFIX);
	}
	if (base64_decode(p, len, key, keylen) != 0 || *keylen == 0) {
		if (*key != NULL)
			free(*key);
		*key = NULL;
		*keylen = 0;
		return -1;
	}
	return 0;
}

void
webhook_standard_hmac(const void *key, size_t keylen, const char *id, const char *ts,
    const void *body, size_t len, unsigned char out[32])
{
	size_t	 msglen = strlen(id) + 1 + strlen(ts) + 1 + len, n;
	char	*msg = xmalloc(msglen + 1);

	n = (size_t)snprintf(msg, msglen + 1, "%s.%s.", id, ts);
	if (len > 0)
		memcpy(msg + n, body, len);
	hmac_sha256(key, keylen, msg, msglen, out);
	free(msg);
}
