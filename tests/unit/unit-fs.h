#pragma once

/*
 * The unit tests' scratch trees: a fresh directory under /tmp, files and directories made in
 * it, and its removal. Every unit test links unit-fs.c (tests/unit/meson.build). Each function
 * checks what it does with cmocka's assertions, so a failure fails the running test (or its
 * fixture) and none returns an error. They allocate nothing except unit_tmpdir_dup(), so
 * the tests that make malloc() fail (oom.h) can use them at any time. Test thread only.
 */

#include <stddef.h>

/*
 * Makes a new directory /tmp/<prefix>-XXXXXX (mkdtemp(3): mode 0700, the X's made unique) and
 * writes its name into @ret, @size bytes long. A name that does not fit fails the test.
 */
void unit_tmpdir(const char *prefix, char *ret, size_t size);

/* The same as unit_tmpdir(), the name on the heap: the caller frees it. */
char *unit_tmpdir_dup(const char *prefix);

/*
 * Makes <base><rel>: an empty file (mode 0644, left as it is if it exists), or a directory
 * (0755) when @rel ends in '/'. Every missing directory above it is made too, @base included.
 * @rel starts with '/'.
 */
void unit_make_path(const char *base, const char *rel);

/*
 * Writes @len bytes of @text as the whole of <base><rel>, made with unit_make_path() first
 * (parents too; an existing file is truncated). @rel starts with '/'.
 */
void unit_write_at(const char *base, const char *rel, const char *text, size_t len);

/*
 * Removes @path and, for a directory, everything under it, links not followed (like rm -rf,
 * without a shell). A @path that does not exist is nothing to do.
 */
void unit_rm_tree(const char *path);
