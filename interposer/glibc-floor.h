#pragma once

/*
 * libedgegpu-cuda.so is preloaded into every process of a gpumem container, whatever glibc
 * the image has, so it must not need a symbol version newer than GLIBC_2.17 (Ubuntu 18.04,
 * CentOS 7): tests/interposer/check-glibc-floor fails the build otherwise. This header is
 * forced into every object of the library (-include, interposer/meson.build) and binds each
 * glibc function whose default version moved above 2.17 to the old version, which every glibc
 * since still exports:
 *   - glibc 2.34 moved libdl and libpthread into libc and gave the moved functions new default
 *     versions (dlopen@@GLIBC_2.34, pthread_once@@GLIBC_2.34, ...). The old versions stay as
 *     compatibility symbols. On a pre-2.34 glibc they live in libdl.so.2 and libpthread.so.0,
 *     which is why the library is linked -Wl,--no-as-needed -ldl -lpthread: those two are then
 *     loaded beside it and the old-versioned lookups find them there.
 *   - glibc 2.33 added fstat/stat/lstat as real symbols (before, inline calls of __fxstat):
 *     the library does not call them (region.c reads files with read/pread).
 * The old versions are the architecture's base version (GLIBC_2.2.5 on x86_64, GLIBC_2.17 on
 * aarch64) except the robust-mutex functions, which came in 2.12 on x86_64.
 */

#if defined(__x86_64__)
#define IPZ_GLIBC_BASE	 "GLIBC_2.2.5"
#define IPZ_GLIBC_ROBUST "GLIBC_2.12"
#elif defined(__aarch64__)
#define IPZ_GLIBC_BASE	 "GLIBC_2.17"
#define IPZ_GLIBC_ROBUST "GLIBC_2.17"
#else
#error "libedgegpu-cuda.so: add this architecture's glibc base version to glibc-floor.h"
#endif

#ifndef __ASSEMBLER__
#define IPZ_SYMVER(sym, ver) __asm__(".symver " #sym "," #sym "@" ver)

IPZ_SYMVER(dlopen, IPZ_GLIBC_BASE);
IPZ_SYMVER(dlclose, IPZ_GLIBC_BASE);
IPZ_SYMVER(dlerror, IPZ_GLIBC_BASE);
IPZ_SYMVER(dlvsym, IPZ_GLIBC_BASE);
IPZ_SYMVER(pthread_once, IPZ_GLIBC_BASE);
IPZ_SYMVER(pthread_mutexattr_init, IPZ_GLIBC_BASE);
IPZ_SYMVER(pthread_mutexattr_destroy, IPZ_GLIBC_BASE);
IPZ_SYMVER(pthread_mutexattr_settype, IPZ_GLIBC_BASE);
IPZ_SYMVER(pthread_mutexattr_setpshared, IPZ_GLIBC_BASE);
IPZ_SYMVER(pthread_mutexattr_setrobust, IPZ_GLIBC_ROBUST);
IPZ_SYMVER(pthread_mutex_consistent, IPZ_GLIBC_ROBUST);
#endif
