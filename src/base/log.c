#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

_Atomic enum log_level log_max_level = LOG_LEVEL_INFO;

#define LEVEL_NAME(level, name) [level] = (name),
static const char *const level_names[LOG_LEVEL_COUNT] = { LOG_LEVEL_NAMES(LEVEL_NAME) };
#undef LEVEL_NAME

const char *log_quote(char *buf, unsigned size, const char *s)
{
	unsigned o = 0;

	if (size < 3) {
		if (size)
			buf[0] = 0;
		return buf;
	}
	buf[o++] = '"';
	for (; s && *s && o + 3 < size; s++) {
		if (*s == '"' || *s == '\\') {
			buf[o++] = '\\';
			buf[o++] = *s;
		} else if (*s == '\n') {
			buf[o++] = '\\';
			buf[o++] = 'n';
		} else if ((unsigned char)*s < 0x20) {
			buf[o++] = '?';
		} else {
			buf[o++] = *s;
		}
	}
	buf[o++] = '"';
	buf[o] = 0;
	return buf;
}

const char *log_q(const char *s)
{
	static __thread char bufs[8][512];
	static __thread unsigned next;

	return log_quote(bufs[next++ % 8], sizeof(bufs[0]), s ? s : "");
}

int log_emit(enum log_level level, const char *module, int r, const char *msg, const char *fmt, ...)
{
	char line[4096], q[512];
	struct timeval tv;
	struct tm tm;
	int n, saved = errno;

	if (r > 0)
		r = -r;
	(void)gettimeofday(&tv, NULL);
	(void)gmtime_r(&tv.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ level=%s",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		     (long)(tv.tv_usec / 1000), level_names[level]);
	if (module && n < (int)sizeof(line))
		n += snprintf(line + n, sizeof(line) - n, " module=%s", module);
	if (n < (int)sizeof(line))
		n += snprintf(line + n, sizeof(line) - n, " msg=%s", log_quote(q, sizeof(q), msg));
	if (fmt && *fmt && n < (int)sizeof(line) - 1) {
		va_list ap;

		line[n++] = ' ';
		va_start(ap, fmt);
		n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
		va_end(ap);
	}
	if (r < 0 && n < (int)sizeof(line)) {
		char eb[128];

		n += snprintf(line + n, sizeof(line) - n, " err=%s errno=%d",
			      log_quote(q, sizeof(q), strerror_r(-r, eb, sizeof(eb))), -r);
	}
	if (n >= (int)sizeof(line) - 1)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	(void)!write(STDERR_FILENO, line, n);
	errno = saved;
	return r;
}
