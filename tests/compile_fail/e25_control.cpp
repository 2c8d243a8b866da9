// tests/compile_fail/e25_control.cpp - the control for e25_chained.cpp: the same code with
// `(a < b) && (b < c)`, which must compile.
#define TLE_E25_CONTROL
#include "e25_chained.cpp"
