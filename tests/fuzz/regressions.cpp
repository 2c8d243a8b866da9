// tests/fuzz/regressions.cpp - every fuzz program that ever failed, as a named regression test
// (tag [fuzz][regression]). Each test case is what `tle_fuzz` printed for the reduced failing
// program (fuzz::to_cpp): the kernel as C++ source, its buffers, and a launch on the interpreter
// and on the CPU backend whose outputs must agree (integers and floats bit for bit, NaN = NaN).
// docs/testing.md lists the bug behind each one.
#include "fuzz/regression.hpp"

// ---- regressions (appended by hand from tle_fuzz's output)
