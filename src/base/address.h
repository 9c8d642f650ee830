#pragma once

#include <stdbool.h>
#include <sys/socket.h>

#include "util.h"

/*
 * Listening addresses as the config and the flags give them: "[host]:port", numeric hosts only
 * (no name is resolved). The metrics server listens on one, the config check validates one and
 * the doctor connects to one, so the parse lives here, below all three.
 */

/*
 * Parses "[host]:port" into @sa/@len. *@all is set when there is no host (":port": every IPv4
 * and IPv6 address, as an IPv6 wildcard). Returns 0, or -EINVAL with *@reterr (caller frees)
 * naming the part that is wrong.
 */
int address_parse(const char *a, struct sockaddr_storage *sa, socklen_t *len, bool *all,
		  char **reterr) WARN_UNUSED;
