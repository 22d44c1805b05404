/* The LD_PRELOAD shim that puts the tests' software security key (keyway-softkey) in front of libfido2: see
 * softkey_shim.c. Nothing here is meant to be called directly; the shim works by interposing libfido2's own
 * functions, so this header only names the environment variable and the path prefix it answers to. */
#ifndef KEYWAY_SOFTKEY_SHIM_H
#define KEYWAY_SOFTKEY_SHIM_H

/* The socket where keyway-softkey listens; without it the shim passes every call through untouched. */
#define KEYWAY_SOFTKEY_ENV "KEYWAY_SOFTKEY"

/* The prefix of the soft key's device path in libfido2's device list: "softkey:" then the socket's path. */
#define KEYWAY_SOFTKEY_PREFIX "softkey:"

#endif
