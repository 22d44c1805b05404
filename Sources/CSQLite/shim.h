// SQLite for Keyway. Only KeywayStore imports this module.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import: bind copies of the bytes through these.
static inline int keyway_sqlite3_bind_text(sqlite3_stmt *statement, int index, const char *text, int length) {
    return sqlite3_bind_text(statement, index, text, length, SQLITE_TRANSIENT);
}

static inline int keyway_sqlite3_bind_blob(sqlite3_stmt *statement, int index, const void *bytes, int length) {
    return sqlite3_bind_blob(statement, index, bytes, length, SQLITE_TRANSIENT);
}

