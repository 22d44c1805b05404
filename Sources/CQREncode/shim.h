// libqrencode for Keyway: the QR code `keyway enroll totp` draws. Only KeywayTools imports this module.
#include <qrencode.h>
