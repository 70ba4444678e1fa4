#pragma once
// Backend fixtures named as they appear in test names ("…<postgres>"), which
// the ctest entries filter on.
#include "support/backends.hpp"

#include <doctest/doctest.h>

TYPE_TO_STRING_AS("sqlite", test::sqlite_db);
TYPE_TO_STRING_AS("postgres", test::postgres_db);
TYPE_TO_STRING_AS("mysql", test::mysql_db);

#define ALL_BACKENDS test::sqlite_db, test::postgres_db, test::mysql_db
#define SERVER_BACKENDS test::postgres_db, test::mysql_db
