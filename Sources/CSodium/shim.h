// libsodium for Keyway. Only KeywayPlatform imports this module.
#include <sodium.h>
