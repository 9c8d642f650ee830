#include "backoff.h"

usec_t backoff_next(struct backoff *b)
{
	usec_t prev = b->last, d;

	if (!prev)
		d = b->first;
	else if (b->factor > 1 && prev > b->max / b->factor)
		d = b->max; /* prev * factor would be past max, or past what usec_t holds */
	else
		d = prev * (b->factor ? b->factor : 1);
	if (d > b->max)
		d = b->max;
	b->grew = !prev || d > prev;
	b->last = d;
	return d;
}

void backoff_reset(struct backoff *b)
{
	b->last = 0;
	b->grew = false;
}

bool backoff_started(const struct backoff *b)
{
	return b->last != 0;
}

bool backoff_grew(const struct backoff *b)
{
	return b->grew;
}
