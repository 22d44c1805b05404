// libpam for pam_keyway.so (PAMKeyway, the module's side) and keyway-lock (an application's side).
#include <security/pam_appl.h>
#include <security/pam_ext.h>
#include <security/pam_modules.h>
#include <syslog.h>

// pam_syslog and pam_prompt are variadic, which Swift cannot call: these pass the text through "%s", so a
// message can never be read as a format string.
static inline void keyway_pam_syslog(const pam_handle_t *pamh, int priority, const char *message) {
    pam_syslog(pamh, priority, "%s", message);
}

static inline int keyway_pam_prompt(pam_handle_t *pamh, int style, char **response, const char *text) {
    return pam_prompt(pamh, style, response, "%s", text);
}
