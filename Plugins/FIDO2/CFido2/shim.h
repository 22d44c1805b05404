// libfido2 for Keyway's security-key backend. Only KeywayFIDO2Key imports this module, and only keywayd links it:
// the PAM module and the CLI never talk to a key (docs/ARCHITECTURE.md §19).
#include <fido.h>
#include <fido/es256.h>
#include <fido/eddsa.h>
