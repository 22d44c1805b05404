// libdbus-1, the reference D-Bus client library, for keywayd's conversations on the system bus (fprintd, logind).
// Only Sources/KeywayDBus imports this module (its DBusConnection.swift is the one caller of dbus_* functions).
// The type codes are macros with casts, which Swift does not import: they are constants here.
#include <dbus/dbus.h>

static const int keyway_dbus_type_invalid = DBUS_TYPE_INVALID;
static const int keyway_dbus_type_string = DBUS_TYPE_STRING;
static const int keyway_dbus_type_object_path = DBUS_TYPE_OBJECT_PATH;
static const int keyway_dbus_type_boolean = DBUS_TYPE_BOOLEAN;
static const int keyway_dbus_type_uint32 = DBUS_TYPE_UINT32;
static const int keyway_dbus_type_int32 = DBUS_TYPE_INT32;
static const int keyway_dbus_type_array = DBUS_TYPE_ARRAY;
static const int keyway_dbus_type_variant = DBUS_TYPE_VARIANT;
static const int keyway_dbus_type_unix_fd = DBUS_TYPE_UNIX_FD;
static const int keyway_dbus_message_type_signal = DBUS_MESSAGE_TYPE_SIGNAL;
static const int keyway_dbus_message_type_error = DBUS_MESSAGE_TYPE_ERROR;

// A DBusError on the heap: its bit fields make it awkward to hold in Swift.
static inline DBusError *keyway_dbus_error_new(void) {
    DBusError *error = (DBusError *)dbus_malloc0(sizeof(DBusError));
    if (error) dbus_error_init(error);
    return error;
}
static inline void keyway_dbus_error_delete(DBusError *error) {
    if (!error) return;
    dbus_error_free(error);
    dbus_free(error);
}
static inline const char *keyway_dbus_error_name(const DBusError *error) { return error->name; }
static inline const char *keyway_dbus_error_message(const DBusError *error) { return error->message; }
