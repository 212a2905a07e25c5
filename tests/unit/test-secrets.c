/* test-secrets.c: sealing (secrets.c): the key's format, AES-256-GCM round trips, what the seal binds. */
#include "spur.h"
#include "secrets.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "tap.h"

#define HEXKEY	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

/* Seals value as org/name (hosts, header) and opens it as org2/name2 (hosts2, header2). */
static int
roundtrip(const unsigned char *k1, const unsigned char *k2, const char *value,
    const char *org, const char *name, const char *hosts, const char *header,
    const char *org2, const char *name2, const char *hosts2, const char *header2,
    char **out)
{
	unsigned char	 nonce[SECRETS_NONCE_LEN], *sealed;
	char		*aad;
	size_t		 aadlen, sealedlen, len;
	int		 rc;

	aad = secrets_aad(org, name, hosts, header, &aadlen);
	if (secrets_seal(k1, aad, aadlen, value, strlen(value), nonce, &sealed,
	    &sealedlen) != 0) {
		free(aad);
		return -2;
	}
	free(aad);
	aad = secrets_aad(org2, name2, hosts2, header2, &aadlen);
	rc = secrets_open(k2, aad, aadlen, nonce, sizeof nonce, sealed, sealedlen, out, &len);
	free(aad);
	free(sealed);
	return rc;
}

/* The same sealing with libcrypto called here directly: the format is what it says. */
static void
check_format(const unsigned char *key)
{
	unsigned char	 nonce[SECRETS_NONCE_LEN], *sealed, out[64];
	EVP_CIPHER_CTX	*ctx = EVP_CIPHER_CTX_new();
	char		*aad;
	size_t		 aadlen, sealedlen;
	int		 n, fin, good;

	aad = secrets_aad("acme", "TOKEN", NULL, NULL, &aadlen);
	ok(aadlen == strlen("spur sealed secret v1") + 1 + 5 + 6 + 1 + 1 &&
	    memcmp(aad, "spur sealed secret v1\0acme\0TOKEN\0\0", aadlen) == 0,
	    "the associated data: a tag, the org, the name, hosts and header, each NUL-ended");
	secrets_seal(key, aad, aadlen, "hunter22", 8, nonce, &sealed, &sealedlen);
	is_int(sealedlen, 8 + SECRETS_TAG_LEN, "sealed: the ciphertext (as long as the value) and a 16-byte tag");
	EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), NULL, key, nonce);
	EVP_DecryptUpdate(ctx, NULL, &n, (unsigned char *)aad, (int)aadlen);
	EVP_DecryptUpdate(ctx, out, &n, sealed, 8);
	EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SECRETS_TAG_LEN, sealed + 8);
	good = EVP_DecryptFinal_ex(ctx, out + n, &fin) == 1;
	ok(good && n + fin == 8 && memcmp(out, "hunter22", 8) == 0,
	    "it is plain AES-256-GCM with a 96-bit nonce: libcrypto opens it on its own");
	ok(memmem(sealed, sealedlen, "hunter22", 8) == NULL, "and the value is not in it");
	EVP_CIPHER_CTX_free(ctx);
	free(sealed);
	free(aad);
}

int
main(void)
{
	unsigned char	 key[SECRETS_KEY_LEN], other[SECRETS_KEY_LEN];
	unsigned char	 n1[SECRETS_NONCE_LEN], n2[SECRETS_NONCE_LEN], *s1, *s2;
	char		*cause = NULL, *v = NULL, *aad;
	size_t		 l1, l2, aadlen, i;

	ok(secrets_key_parse(HEXKEY, 64, key, &cause) == 0 && key[0] == 0 && key[31] == 0x1f,
	    "secrets.key: 64 hex digits are the 32 bytes");
	ok(secrets_key_parse("000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F",
	    64, other, &cause) == 0 && memcmp(key, other, 32) == 0, "in either case");
	ok(secrets_key_parse(HEXKEY, 62, other, &cause) == -1 && strstr(cause, "64 hex digits") != NULL,
	    "31 bytes are refused, saying what is wanted (%s)", cause);
	free(cause);
	cause = NULL;
	ok(secrets_key_parse(HEXKEY "00", 66, other, &cause) == -1, "33 bytes are refused");
	free(cause);
	cause = NULL;
	ok(secrets_key_parse("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=", 44, other, &cause) == -1,
	    "base64 is refused: one encoding, no guessing");
	free(cause);
	cause = NULL;
	ok(secrets_key_parse("zz0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", 64,
	    other, &cause) == -1, "a non-hex digit is refused");
	free(cause);
	cause = NULL;
	memcpy(other, key, sizeof other);
	other[5] ^= 1;

	ok(roundtrip(key, key, "npm_token_value", "acme", "NPM", NULL, NULL, "acme", "NPM", NULL,
	    NULL, &v) == 0 && strcmp(v, "npm_token_value") == 0, "a sealed value opens as itself");
	free(v);
	v = NULL;
	ok(roundtrip(key, other, "npm_token_value", "acme", "NPM", NULL, NULL, "acme", "NPM", NULL,
	    NULL, &v) == -1 && v == NULL, "with another key it does not open (the tag)");
	ok(roundtrip(key, key, "v4lue", "acme", "NPM", NULL, NULL, "other", "NPM", NULL, NULL,
	    &v) == -1, "moved to another org it does not open");
	ok(roundtrip(key, key, "v4lue", "acme", "NPM", NULL, NULL, "acme", "NPM2", NULL, NULL,
	    &v) == -1, "renamed it does not open");
	ok(roundtrip(key, key, "v4lue", "acme", "NPM", NULL, NULL, "acmeN", "PM", NULL, NULL,
	    &v) == -1, "nor with the boundary between org and name moved");
	ok(roundtrip(key, key, "v4lue", "acme", "GH", "[\"a.example\"]", "Authorization: Bearer {value}",
	    "acme", "GH", "[\"evil.example\"]", "Authorization: Bearer {value}", &v) == -1,
	    "a header secret bound to another host does not open");
	ok(roundtrip(key, key, "v4lue", "acme", "GH", "[\"a.example\"]", "Authorization: Bearer {value}",
	    "acme", "GH", NULL, NULL, &v) == -1, "nor turned into an env secret");

	aad = secrets_aad("acme", "X", NULL, NULL, &aadlen);
	secrets_seal(key, aad, aadlen, "same value", 10, n1, &s1, &l1);
	secrets_seal(key, aad, aadlen, "same value", 10, n2, &s2, &l2);
	ok(memcmp(n1, n2, sizeof n1) != 0 && memcmp(s1, s2, l1) != 0,
	    "each sealing has a fresh nonce: the same value twice looks different");
	s1[3] ^= 0x40;
	ok(secrets_open(key, aad, aadlen, n1, sizeof n1, s1, l1, &v, &l2) == -1,
	    "a flipped ciphertext bit does not open");
	s1[3] ^= 0x40;
	s1[l1 - 1] ^= 1;
	ok(secrets_open(key, aad, aadlen, n1, sizeof n1, s1, l1, &v, &l2) == -1,
	    "a flipped tag bit does not open");
	ok(secrets_open(key, aad, aadlen, n1, 8, s1, l1, &v, &l2) == -1, "a short nonce is refused");
	ok(secrets_open(key, aad, aadlen, n1, sizeof n1, s1, 10, &v, &l2) == -1,
	    "a sealed text shorter than a tag is refused");
	free(s1);
	free(s2);
	free(aad);

	ok(secrets_header_valid("Authorization: Bearer {value}", &cause) == 0, "header: the default");
	ok(secrets_header_valid("X-Token: {value}", &cause) == 0, "header: another name");
	ok(secrets_header_valid("X-Token: static", &cause) == -1, "header: without {value}");
	free(cause);
	ok(secrets_header_valid("Bad Name: {value}", &cause) == -1, "header: a name with a space");
	free(cause);
	ok(secrets_header_valid("X: {value}\r\nX-Evil: 1", &cause) == -1, "header: a line break");
	free(cause);
	ok(secrets_header_valid("{value}", &cause) == -1, "header: no name");
	free(cause);
	for (i = 0; i < 2; i++)
		ok(secrets_name_valid(i == 0 ? "NPM_TOKEN" : "_x1"), "name %zu: a variable's", i);
	ok(!secrets_name_valid("1X") && !secrets_name_valid("A-B") && !secrets_name_valid("") &&
	    !secrets_name_valid("A=B"), "names: not a variable's are refused");
	check_format(key);
	return tap_done();
}
