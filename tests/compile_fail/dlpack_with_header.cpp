// tests/compile_fail/dlpack_with_header.cpp - the control of dlpack_without_header.cpp: with
// tle/dlpack.hpp included, passing a DLTensor* compiles.
#define TLE_DLPACK_CONTROL
#include "dlpack_without_header.cpp"
