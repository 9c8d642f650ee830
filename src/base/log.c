#include "log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

_Atomic enum log_level log_max_level = LOG_LEVEL_INFO;
_Atomic enum log_format log_line_format = LOG_FORMAT_LOGFMT;

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

/* A bounded output line; the last JSON_RESERVE bytes are kept for closing the line. */
struct line {
	char *p;
	size_t n, cap;
	bool full;
};

#define JSON_RESERVE 4 /* "}\n and a closing quote */

static void put(struct line *o, const char *s, size_t n)
{
	if (o->full || o->n + n + JSON_RESERVE > o->cap) {
		o->full = true;
		return;
	}
	memcpy(o->p + o->n, s, n);
	o->n += n;
}

/* The length of the valid UTF-8 sequence at @s (at most @n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	/* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* @s (@n bytes) as a JSON string, cut where the line is full; false when not even begun. */
static bool put_json_string(struct line *o, const char *s, size_t n)
{
	put(o, "\"", 1);
	if (o->full)
		return false;
	for (size_t i = 0; i < n && !o->full;) {
		unsigned char c = (unsigned char)s[i];
		size_t len = utf8_len((const unsigned char *)s + i, n - i);
		char esc[8];

		if (len == 0) {
			put(o, "\\ufffd", 6);
			i++;
			continue;
		}
		if (len > 1) {
			put(o, s + i, len);
		} else if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			put(o, esc, 2);
		} else if (c == '\n') {
			put(o, "\\n", 2);
		} else if (c == '\r') {
			put(o, "\\r", 2);
		} else if (c == '\t') {
			put(o, "\\t", 2);
		} else if (c < 0x20 || c == 0x7f) {
			(void)snprintf(esc, sizeof(esc), "\\u%04x", c);
			put(o, esc, 6);
		} else {
			put(o, s + i, 1);
		}
		i += len;
	}
	/* The reserve always has room for the closing quote, even when the value was cut. */
	o->p[o->n++] = '"';
	return true;
}

/* ,"key":"value", or nothing when the line has no room left for both to begin. */
static void put_json_pair(struct line *o, const char *key, size_t klen, const char *v, size_t n)
{
	size_t start = o->n;

	put(o, ",", 1);
	if (!put_json_string(o, key, klen) || (put(o, ":", 1), o->full) ||
	    !put_json_string(o, v, n))
		o->n = start;
}

/*
 * The key=value tail of a logfmt line as JSON members: a value in double quotes loses them and
 * its \" \\ \n escapes; a word without '=' belongs to the value before it (a value printed
 * with %s that held a space). Decoded values go to @scratch, which is as large as @tail.
 */
static void put_json_tail(struct line *o, const char *tail, char *scratch)
{
	const char *key = NULL, *p = tail;
	size_t klen = 0, vstart = 0, vlen = 0, used = 0;

	while (*p) {
		const char *k, *eq;

		while (*p == ' ')
			p++;
		if (!*p)
			break;
		k = p;
		while (*p && *p != ' ' && *p != '=')
			p++;
		eq = *p == '=' ? p : NULL;
		if (!eq || eq == k) { /* a lone word: part of the value before it */
			while (*p && *p != ' ')
				p++;
			if (key) {
				scratch[used++] = ' ';
				memcpy(scratch + used, k, (size_t)(p - k));
				used += (size_t)(p - k);
				vlen = used - vstart;
			}
			continue;
		}
		if (key)
			put_json_pair(o, key, klen, scratch + vstart, vlen);
		key = k;
		klen = (size_t)(eq - k);
		vstart = used;
		p = eq + 1;
		if (*p == '"') {
			for (p++; *p && *p != '"'; p++) {
				char c = *p;

				if (c == '\\' && p[1]) {
					c = *++p;
					if (c == 'n')
						c = '\n';
				}
				scratch[used++] = c;
			}
			if (*p == '"')
				p++;
		} else {
			while (*p && *p != ' ')
				scratch[used++] = *p++;
		}
		vlen = used - vstart;
	}
	if (key)
		put_json_pair(o, key, klen, scratch + vstart, vlen);
}

int log_emit(enum log_level level, const char *module, int r, const char *msg, const char *fmt, ...)
{
	char ts[64], tail[4096], q[512], out[16384];
	struct line o = { .p = out, .cap = sizeof(out) };
	struct timeval tv;
	struct tm tm;
	size_t t = 0;
	int saved = errno;

	if (r > 0)
		r = -r;
	(void)gettimeofday(&tv, NULL);
	(void)gmtime_r(&tv.tv_sec, &tm);
	(void)snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		       (long)(tv.tv_usec / 1000));
	tail[0] = 0;
	if (fmt && *fmt) {
		va_list ap;
		int n;

		va_start(ap, fmt);
		n = vsnprintf(tail, sizeof(tail), fmt, ap);
		va_end(ap);
		t = n < 0 ? 0 : (size_t)n < sizeof(tail) ? (size_t)n : sizeof(tail) - 1;
		tail[t] = 0;
	}
	if (r < 0 && t < sizeof(tail)) {
		char eb[128];
		int n;

		n = snprintf(tail + t, sizeof(tail) - t, "%serr=%s errno=%d", t ? " " : "",
			     log_quote(q, sizeof(q), strerror_r(-r, eb, sizeof(eb))), -r);
		t += n < 0 ? 0 : (size_t)n < sizeof(tail) - t ? (size_t)n : sizeof(tail) - t - 1;
	}
	if (log_line_format == LOG_FORMAT_JSON) {
		char scratch[sizeof(tail)];

		put(&o, "{\"ts\":\"", 7);
		put(&o, ts, strlen(ts));
		put(&o, "\",\"level\":\"", 11);
		put(&o, level_names[level], strlen(level_names[level]));
		put(&o, "\"", 1);
		if (module)
			put_json_pair(&o, "module", 6, module, strlen(module));
		put_json_pair(&o, "msg", 3, msg ? msg : "", msg ? strlen(msg) : 0);
		put_json_tail(&o, tail, scratch);
		o.p[o.n++] = '}';
	} else {
		int n = snprintf(out, sizeof(out) - 1, "ts=%s level=%s%s%s msg=%s%s%s", ts,
				 level_names[level], module ? " module=" : "", module ? module : "",
				 log_quote(q, sizeof(q), msg), t ? " " : "", tail);

		o.n = n < 0 ? 0 : (size_t)n < sizeof(out) - 1 ? (size_t)n : sizeof(out) - 2;
	}
	o.p[o.n++] = '\n';
	(void)!write(STDERR_FILENO, out, o.n);
	errno = saved;
	return r;
}
