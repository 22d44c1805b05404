/* What the tests' software security key (Tests/KeywaySoftKey) needs from OpenSSL's libcrypto and libsodium lacks:
 * NIST P-256 (ES256 signatures, and the ECDH of CTAP2's PIN protocol), AES-256-CBC and HMAC-SHA-256. A test
 * program's helper only: nothing Keyway ships links it. Every function returns 1 on success and 0 on failure. */
#ifndef KEYWAY_SOFTKEY_CRYPTO_H
#define KEYWAY_SOFTKEY_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* A new P-256 private key: a 32-byte big-endian scalar. */
int softkey_p256_generate(uint8_t secret[32]);

/* The public point of `secret`, as its x and y coordinates (32 bytes each, big-endian). */
int softkey_p256_public(const uint8_t secret[32], uint8_t x[32], uint8_t y[32]);

/* The ECDSA signature (DER, at most 72 bytes, its length in *length) over SHA-256(message) by `secret`. */
int softkey_p256_sign(const uint8_t secret[32], const uint8_t *message, size_t count, uint8_t signature[72],
                      size_t *length);

/* The x coordinate of `secret` times the point (x, y): the shared secret Z of ECDH. Fails for a point not on the
 * curve. */
int softkey_p256_ecdh(const uint8_t secret[32], const uint8_t x[32], const uint8_t y[32], uint8_t z[32]);

/* A self-signed X.509 certificate (DER, at most 1024 bytes, its length in *length) for the P-256 key `secret`: the
 * attestation certificate of a packed attestation with x5c, as a real key's, so pamu2fcfg's fido_cred_verify takes
 * it. */
int softkey_p256_certificate(const uint8_t secret[32], uint8_t certificate[1024], size_t *length);

/* AES-256-CBC with a zero IV and no padding (CTAP2's PIN protocol one); `count` a multiple of 16. */
int softkey_aes256_cbc(int encrypt, const uint8_t key[32], const uint8_t *input, size_t count, uint8_t *output);

/* HMAC-SHA-256 of `message` under `key`. */
int softkey_hmac_sha256(const uint8_t *key, size_t key_count, const uint8_t *message, size_t count,
                        uint8_t mac[32]);

#endif
