/* Listening addresses: "[host]:port" to a socket address (address.h). */

#include "address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>

int address_parse(const char *a, struct sockaddr_storage *sa, socklen_t *len, bool *all,
		  char **reterr)
{
	const char *colon, *host_end, *host = a;
	char hostbuf[INET6_ADDRSTRLEN];
	unsigned port;
	size_t n;

	*all = false;
	if (!a || !*a)
		return set_error(reterr, -EINVAL, "empty address: expected [host]:port");
	if (*a == '[') {
		host = a + 1;
		host_end = strchr(host, ']');
		if (!host_end)
			return set_error(reterr, -EINVAL,
					 "address \"%s\": missing ']' after the IPv6 address", a);
		colon = host_end + 1;
		if (*colon != ':')
			return set_error(reterr, -EINVAL,
					 "address \"%s\": missing \":port\" after ']'", a);
	} else {
		colon = strrchr(a, ':');
		if (!colon)
			return set_error(reterr, -EINVAL, "address \"%s\": missing \":port\"", a);
		host_end = colon;
		if (memchr(a, ':', (size_t)(colon - a)))
			return set_error(
				reterr, -EINVAL,
				"address \"%s\": an IPv6 address needs brackets: [addr]:port", a);
	}
	if (!colon[1])
		return set_error(reterr, -EINVAL, "address \"%s\": missing port after ':'", a);
	if (safe_atou(colon + 1, &port) < 0 || port > 65535)
		return set_error(reterr, -EINVAL,
				 "address \"%s\": port \"%s\" is not a number from 0 to 65535", a,
				 colon + 1);

	n = (size_t)(host_end - host);
	memset(sa, 0, sizeof(*sa));
	if (n == 0 && *a != '[') {
		*all = true;
		n = 0;
	}
	if (n >= sizeof(hostbuf))
		return set_error(
			reterr, -EINVAL,
			"address \"%s\": host \"%.*s\" is not an IP address (host names are not resolved)",
			a, (int)n, host);
	memcpy(hostbuf, host, n);
	hostbuf[n] = 0;
	if (*all || *a == '[') {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)sa;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		if (!*all && inet_pton(AF_INET6, hostbuf, &in6->sin6_addr) != 1)
			return set_error(reterr, -EINVAL,
					 "address \"%s\": \"%s\" is not an IPv6 address", a,
					 hostbuf);
		*len = sizeof(*in6);
	} else {
		struct sockaddr_in *in = (struct sockaddr_in *)sa;

		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, hostbuf, &in->sin_addr) != 1)
			return set_error(
				reterr, -EINVAL,
				"address \"%s\": host \"%s\" is not an IP address (host names are not resolved)",
				a, hostbuf);
		*len = sizeof(*in);
	}
	return 0;
}
