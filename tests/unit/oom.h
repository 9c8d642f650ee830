#pragma once

/*
 * Allocation failure injection for unit tests (STYLE.md 3.7: fail the Nth allocation).
 * Link the test with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=strndup,
 *   --wrap=asprintf,--wrap=vasprintf
 * (unit_extra in tests/unit/meson.build): calls from the objects of the test binary
 * (libcore's modules, the test itself) go through these wrappers; cmocka and libc internals
 * do not. Include this header in exactly one file of the test.
 *
 *   for (long n = 0;; n++) {
 *           oom_fail_at(n);
 *           r = function_under_test(...);
 *           oom_off();
 *           if (r != -ENOMEM)
 *                   break;                  // n passed the number of allocations
 *           assert nothing leaked / nothing returned;
 *   }
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

static long oom_countdown = -1; /* -1: off; 0: the next allocation fails */
static long oom_failed;		/* allocations failed so far */

static inline void oom_fail_at(long n)
{
	oom_countdown = n;
}

static inline void oom_off(void)
{
	oom_countdown = -1;
}

static bool oom_now(void)
{
	if (oom_countdown < 0)
		return false;
	if (oom_countdown-- > 0)
		return false;
	oom_failed++;
	return true;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_vasprintf(char **ret, const char *fmt, va_list ap);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);
int __wrap_vasprintf(char **ret, const char *fmt, va_list ap);
int __wrap_asprintf(char **ret, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void *__wrap_malloc(size_t n)
{
	return oom_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return oom_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
	return oom_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	return oom_now() ? NULL : __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	return oom_now() ? NULL : __real_strndup(s, n);
}

int __wrap_vasprintf(char **ret, const char *fmt, va_list ap)
{
	return oom_now() ? -1 : __real_vasprintf(ret, fmt, ap);
}

int __wrap_asprintf(char **ret, const char *fmt, ...)
{
	va_list ap;
	int r;

	if (oom_now())
		return -1;
	va_start(ap, fmt);
	r = __real_vasprintf(ret, fmt, ap);
	va_end(ap);
	return r;
}
