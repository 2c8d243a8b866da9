/* libdevice (CUDA's math library as LLVM bitcode), embedded in libtle at build time so that the
   runtime needs no toolkit path. The path comes from CMake (TLE_LIBDEVICE_PATH). */
    .section .rodata
    .global tle_libdevice_begin
    .global tle_libdevice_end
    .hidden tle_libdevice_begin
    .hidden tle_libdevice_end
    .balign 16
tle_libdevice_begin:
    .incbin TLE_LIBDEVICE_PATH
tle_libdevice_end:
    .byte 0
    .section .note.GNU-stack,"",@progbits
