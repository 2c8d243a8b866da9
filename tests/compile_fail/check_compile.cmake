# tests/compile_fail/check_compile.cmake - compiles one source file with the project's compiler and
# flags and checks the outcome.
#   cmake -DCXX=<compiler> -DFLAGS=<flags> -DINCLUDE=<dir> -DSRC=<file> -DEXPECT=fail|pass
#         [-DPATTERN=<text the diagnostics must contain>[|<another text>...]] -P check_compile.cmake
# FLAGS may define macros (-DTLE_CF_CASE=3) to pick one case of a file.
foreach(v CXX INCLUDE SRC EXPECT)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_compile.cmake: ${v} is not set")
  endif()
endforeach()
separate_arguments(flag_list UNIX_COMMAND "${FLAGS}")
execute_process(
  COMMAND ${CXX} ${flag_list} -I${INCLUDE} -fsyntax-only ${SRC}
  RESULT_VARIABLE rc
  OUTPUT_VARIABLE out
  ERROR_VARIABLE err)
set(diag "${out}${err}")
if(EXPECT STREQUAL "fail")
  if(rc EQUAL 0)
    message(FATAL_ERROR "${SRC} (${FLAGS}) compiled, but it must not")
  endif()
  if(DEFINED PATTERN)
    string(REPLACE "|" ";" patterns "${PATTERN}")
    foreach(p IN LISTS patterns)
      string(FIND "${diag}" "${p}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "${SRC} (${FLAGS}) failed to compile, but the diagnostics do not mention '${p}':\n${diag}")
      endif()
    endforeach()
  endif()
  message(STATUS "${SRC} does not compile, as required (diagnostics mention '${PATTERN}')")
elseif(EXPECT STREQUAL "pass")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${SRC} must compile, but failed:\n${diag}")
  endif()
  message(STATUS "${SRC} compiles, as required")
else()
  message(FATAL_ERROR "check_compile.cmake: EXPECT must be fail or pass, got '${EXPECT}'")
endif()
