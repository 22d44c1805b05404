// libpq, PostgreSQL's C client, for Keyway's fleet store. Only KeywayStore imports this module
// (Sources/KeywayStore/PostgresConnection.swift is the one caller of PQ* functions).
#include <libpq-fe.h>
