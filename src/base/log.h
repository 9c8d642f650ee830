#pragma once

/*
 * Structured logging: one line per event on stderr, logfmt (the default) or JSON (log_line_format,
 * edgegpu.logFormat), with the same fields in both:
 *
 *   ts=2026-01-05T10:00:00.123Z level=warn module=kubelet msg="register failed, retrying" err=...
 *   {"ts":"2026-01-05T10:00:00.123Z","level":"warn","module":"kubelet","msg":"register ...",...}
 *
 * In JSON every value is a string: the key=value tail is read back from its logfmt form (a
 * quoted value unquoted), and strings are escaped as RFC 8259 asks, a byte that is not part of
 * valid UTF-8 becoming U+FFFD.
 *
 * The message is a fixed, greppable string; variable parts go in the printf-style key=value
 * tail. The level is checked before any argument is evaluated.
 */

#include <stdarg.h>
#include <stdbool.h>

enum log_level {
	LOG_LEVEL_DEBUG,
	LOG_LEVEL_INFO,
	LOG_LEVEL_WARN,
	LOG_LEVEL_ERROR,
	LOG_LEVEL_COUNT,
};

/*
 * The one list of level names, X(level, name) per level: the log prints them (level=warn) and
 * the config reads them (edgegpu.logLevel).
 */
/* clang-format off */
#define LOG_LEVEL_NAMES(X)		\
	X(LOG_LEVEL_DEBUG, "debug")	\
	X(LOG_LEVEL_INFO, "info")	\
	X(LOG_LEVEL_WARN, "warn")	\
	X(LOG_LEVEL_ERROR, "error")
/* clang-format on */

enum log_format {
	LOG_FORMAT_LOGFMT,
	LOG_FORMAT_JSON,
	LOG_FORMAT_COUNT,
};

/* The format names, X(format, name) each, for the config (edgegpu.logFormat). */
/* clang-format off */
#define LOG_FORMAT_NAMES(X)			\
	X(LOG_FORMAT_LOGFMT, "logfmt")		\
	X(LOG_FORMAT_JSON, "json")
/* clang-format on */

/* Written by the loop (start, SIGHUP), read by every thread: atomic. */
extern _Atomic enum log_level log_max_level;
extern _Atomic enum log_format log_line_format;

/*
 * Writes one line. @module may be NULL. @fmt formats the key=value tail and may be NULL.
 * Returns @r as -abs(r), so callers can write `return log_emit(...)`.
 */
int log_emit(enum log_level level, const char *module, int r, const char *msg, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Quotes @s for a logfmt value into @buf (always NUL-terminated); returns buf. */
const char *log_quote(char *buf, unsigned size, const char *s);

/*
 * log_quote() into one of a few thread-local buffers, for use in a log call's arguments:
 * log_warn("x", "reason=%s", log_q(msg)). Up to 8 per call; each value at most 511 bytes.
 */
const char *log_q(const char *s);

/* A module that logs defines LOG_MODULE ("plugin", ...) before using the macros below. */

#define log_at(lvl, r, msg, ...)                                                               \
	({                                                                                     \
		int _r = (r);                                                                  \
		(lvl) >= log_max_level ? log_emit((lvl), LOG_MODULE, _r, (msg), __VA_ARGS__) : \
					 (_r < 0 ? _r : -_r);                                  \
	})

#define log_debug(msg, ...) ((void)log_at(LOG_LEVEL_DEBUG, 0, msg, __VA_ARGS__))
#define log_info(msg, ...)  ((void)log_at(LOG_LEVEL_INFO, 0, msg, __VA_ARGS__))
#define log_warn(msg, ...)  ((void)log_at(LOG_LEVEL_WARN, 0, msg, __VA_ARGS__))
#define log_error(msg, ...) ((void)log_at(LOG_LEVEL_ERROR, 0, msg, __VA_ARGS__))
/* The _errno forms add err= and errno= and return -abs(r). */
#define log_debug_errno(r, msg, ...) log_at(LOG_LEVEL_DEBUG, r, msg, __VA_ARGS__)
#define log_info_errno(r, msg, ...)  log_at(LOG_LEVEL_INFO, r, msg, __VA_ARGS__)
#define log_warn_errno(r, msg, ...)  log_at(LOG_LEVEL_WARN, r, msg, __VA_ARGS__)
#define log_error_errno(r, msg, ...) log_at(LOG_LEVEL_ERROR, r, msg, __VA_ARGS__)
