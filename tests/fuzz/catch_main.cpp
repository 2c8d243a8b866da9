// tests/fuzz/catch_main.cpp - Catch2's main for tle_fuzz_printed (the printer check).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
