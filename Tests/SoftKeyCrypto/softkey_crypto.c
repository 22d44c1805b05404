/* See include/softkey_crypto.h. OpenSSL 3's EC_KEY calls are deprecated in favour of EVP_PKEY's parameter builders;
 * for raw 32-byte scalars and coordinates they are a third as long, and this is a test helper. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "softkey_crypto.h"

#include <openssl/bn.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/obj_mac.h>
#include <openssl/sha.h>
#include <openssl/x509.h>

/* The key of `secret`, with its public point computed. */
static EC_KEY *key_of(const uint8_t secret[32]) {
    EC_KEY *key = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    BIGNUM *d = BN_bin2bn(secret, 32, NULL);
    EC_POINT *point = NULL;
    int ok = key != NULL && d != NULL && EC_KEY_set_private_key(key, d) == 1;
    if (ok) {
        const EC_GROUP *group = EC_KEY_get0_group(key);
        point = EC_POINT_new(group);
        ok = point != NULL && EC_POINT_mul(group, point, d, NULL, NULL, NULL) == 1 &&
             EC_KEY_set_public_key(key, point) == 1;
    }
    EC_POINT_free(point);
    BN_clear_free(d);
    if (!ok) {
        EC_KEY_free(key);
        return NULL;
    }
    return key;
}

int softkey_p256_generate(uint8_t secret[32]) {
    EC_KEY *key = EC_KEY_new_by_curve_name(NID_X9_62_prime256v1);
    int ok = key != NULL && EC_KEY_generate_key(key) == 1 &&
             BN_bn2binpad(EC_KEY_get0_private_key(key), secret, 32) == 32;
    EC_KEY_free(key);
    return ok;
}

int softkey_p256_public(const uint8_t secret[32], uint8_t x[32], uint8_t y[32]) {
    EC_KEY *key = key_of(secret);
    BIGNUM *bx = BN_new(), *by = BN_new();
    int ok = key != NULL && bx != NULL && by != NULL &&
             EC_POINT_get_affine_coordinates(EC_KEY_get0_group(key), EC_KEY_get0_public_key(key), bx, by, NULL) ==
                 1 &&
             BN_bn2binpad(bx, x, 32) == 32 && BN_bn2binpad(by, y, 32) == 32;
    BN_free(bx);
    BN_free(by);
    EC_KEY_free(key);
    return ok;
}

int softkey_p256_sign(const uint8_t secret[32], const uint8_t *message, size_t count, uint8_t signature[72],
                      size_t *length) {
    uint8_t digest[SHA256_DIGEST_LENGTH];
    SHA256(message, count, digest);
    EC_KEY *key = key_of(secret);
    ECDSA_SIG *sig = key != NULL ? ECDSA_do_sign(digest, sizeof digest, key) : NULL;
    int ok = 0;
    if (sig != NULL) {
        int needed = i2d_ECDSA_SIG(sig, NULL);
        if (needed > 0 && needed <= 72) {
            uint8_t *out = signature;
            *length = (size_t)i2d_ECDSA_SIG(sig, &out);
            ok = 1;
        }
    }
    ECDSA_SIG_free(sig);
    EC_KEY_free(key);
    return ok;
}

int softkey_p256_ecdh(const uint8_t secret[32], const uint8_t x[32], const uint8_t y[32], uint8_t z[32]) {
    EC_KEY *key = key_of(secret);
    if (key == NULL) return 0;
    const EC_GROUP *group = EC_KEY_get0_group(key);
    BIGNUM *bx = BN_bin2bn(x, 32, NULL), *by = BN_bin2bn(y, 32, NULL), *zx = BN_new();
    EC_POINT *peer = EC_POINT_new(group), *shared = EC_POINT_new(group);
    int ok = bx != NULL && by != NULL && zx != NULL && peer != NULL && shared != NULL &&
             EC_POINT_set_affine_coordinates(group, peer, bx, by, NULL) == 1 &&
             EC_POINT_is_on_curve(group, peer, NULL) == 1 &&
             EC_POINT_mul(group, shared, NULL, peer, EC_KEY_get0_private_key(key), NULL) == 1 &&
             EC_POINT_get_affine_coordinates(group, shared, zx, NULL, NULL) == 1 && BN_bn2binpad(zx, z, 32) == 32;
    BN_free(bx);
    BN_free(by);
    BN_clear_free(zx);
    EC_POINT_free(peer);
    EC_POINT_clear_free(shared);
    EC_KEY_free(key);
    return ok;
}

int softkey_aes256_cbc(int encrypt, const uint8_t key[32], const uint8_t *input, size_t count, uint8_t *output) {
    static const uint8_t iv[16] = {0};
    if (count % 16 != 0 || count > 1 << 20) return 0;
    EVP_CIPHER_CTX *context = EVP_CIPHER_CTX_new();
    int written = 0, last = 0;
    int ok = context != NULL && EVP_CipherInit_ex(context, EVP_aes_256_cbc(), NULL, key, iv, encrypt) == 1 &&
             EVP_CIPHER_CTX_set_padding(context, 0) == 1 &&
             EVP_CipherUpdate(context, output, &written, input, (int)count) == 1 &&
             EVP_CipherFinal_ex(context, output + written, &last) == 1 && (size_t)(written + last) == count;
    EVP_CIPHER_CTX_free(context);
    return ok;
}

int softkey_hmac_sha256(const uint8_t *key, size_t key_count, const uint8_t *message, size_t count,
                        uint8_t mac[32]) {
    unsigned int length = 0;
    return HMAC(EVP_sha256(), key, (int)key_count, message, count, mac, &length) != NULL && length == 32;
}

int softkey_p256_certificate(const uint8_t secret[32], uint8_t certificate[1024], size_t *length) {
    EC_KEY *key = key_of(secret);
    EVP_PKEY *pkey = EVP_PKEY_new();
    X509 *cert = X509_new();
    X509_NAME *name = X509_NAME_new();
    int ok = key != NULL && pkey != NULL && cert != NULL && name != NULL && EVP_PKEY_set1_EC_KEY(pkey, key) == 1 &&
             X509_set_version(cert, 2) == 1 && ASN1_INTEGER_set(X509_get_serialNumber(cert), 1) == 1 &&
             X509_gmtime_adj(X509_getm_notBefore(cert), -3600) != NULL &&
             X509_gmtime_adj(X509_getm_notAfter(cert), 365L * 24 * 3600) != NULL &&
             X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"Keyway tests", -1, -1, 0) ==
                 1 &&
             X509_NAME_add_entry_by_txt(name, "OU", MBSTRING_ASC,
                                        (const unsigned char *)"Authenticator Attestation", -1, -1, 0) == 1 &&
             X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"keyway-softkey", -1, -1,
                                        0) == 1 &&
             X509_set_subject_name(cert, name) == 1 && X509_set_issuer_name(cert, name) == 1 &&
             X509_set_pubkey(cert, pkey) == 1 && X509_sign(cert, pkey, EVP_sha256()) > 0;
    if (ok) {
        int needed = i2d_X509(cert, NULL);
        ok = needed > 0 && needed <= 1024;
        if (ok) {
            uint8_t *out = certificate;
            *length = (size_t)i2d_X509(cert, &out);
        }
    }
    X509_NAME_free(name);
    X509_free(cert);
    EVP_PKEY_free(pkey);
    EC_KEY_free(key);
    return ok;
}
