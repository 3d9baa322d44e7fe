/* parse.c - sizes, durations, counts and names. */
#include "util/parse.h"

#include <ctype.h>
#include <errno.h>
#include <string.h>
#include <strings.h>

/* A decimal number "123" or "1.25": the whole part and the fraction in
 * thousandths (further digits are dropped), so that fractional sizes and
 * CPU counts need no floating point. */
struct decimal {
	uint64_t whole;
	uint64_t milli; /* 0..999 */
};

static int parse_decimal(const char **p, struct decimal *out)
{
	const char *s = *p;
	uint64_t whole = 0, frac = 0, frac_scale = 1000;
	int digits = 0;

	while (isdigit((unsigned char)*s)) {
		uint64_t d = (uint64_t)(*s - '0');
		if (whole > (UINT64_MAX - d) / 10)
			return -ERANGE;
		whole = whole * 10 + d;
		s++;
		digits++;
	}
	if (*s == '.') {
		s++;
		while (isdigit((unsigned char)*s)) {
			if (frac_scale > 1) {
				frac_scale /= 10;
				frac += (uint64_t)(*s - '0') * frac_scale;
			}
			s++;
			digits++;
		}
	}
	if (digits == 0)
		return -EINVAL;
	out->whole = whole;
	out->milli = frac;
	*p = s;
	return 0;
}

/* value * unit, exactly (to the unit's thousandth), or -ERANGE. */
static int scale_checked(const struct decimal *v, uint64_t unit, uint64_t *out)
{
	unsigned __int128 total = (unsigned __int128)v->whole * unit +
				  (unsigned __int128)v->milli * unit / 1000;
	if (total > UINT64_MAX)
		return -ERANGE;
	*out = (uint64_t)total;
	return 0;
}

int wr_parse_size(const char *text, uint64_t *out_bytes)
{
	if (!text || !*text)
		return -EINVAL;
	const char *p = text;
	struct decimal value;
	int r = parse_decimal(&p, &value);
	if (r < 0)
		return r;
	uint64_t unit = 1;
	if (*p) {
		switch (tolower((unsigned char)*p)) {
		case 'b': unit = 1; break;
		case 'k': unit = 1ULL << 10; break;
		case 'm': unit = 1ULL << 20; break;
		case 'g': unit = 1ULL << 30; break;
		case 't': unit = 1ULL << 40; break;
		default: return -EINVAL;
		}
		p++;
		/* accept K, KB, KiB (all binary) */
		if (unit > 1 &&
		    (strcasecmp(p, "ib") == 0 || strcasecmp(p, "b") == 0))
			p += strlen(p);
		if (*p)
			return -EINVAL;
	}
	uint64_t bytes;
	r = scale_checked(&value, unit, &bytes);
	if (r < 0)
		return r;
	*out_bytes = bytes;
	return 0;
}

int wr_parse_duration(const char *text, uint64_t *out_ms)
{
	if (!text || !*text)
		return -EINVAL;
	const char *p = text;
	uint64_t total = 0;
	int parts = 0;
	while (*p) {
		struct decimal value;
		int r = parse_decimal(&p, &value);
		if (r < 0)
			return r;
		uint64_t unit_ms;
		if (strncmp(p, "ms", 2) == 0) {
			unit_ms = 1;
			p += 2;
		} else if (*p == 's') {
			unit_ms = 1000;
			p++;
		} else if (*p == 'm') {
			unit_ms = 60 * 1000;
			p++;
		} else if (*p == 'h') {
			unit_ms = 3600 * 1000;
			p++;
		} else if (*p == 'd') {
			unit_ms = 86400 * 1000;
			p++;
		} else if (*p == '\0' && parts == 0) {
			unit_ms = 1000; /* bare number: seconds */
		} else {
			return -EINVAL;
		}
		uint64_t ms;
		r = scale_checked(&value, unit_ms, &ms);
		if (r < 0)
			return r;
		if (total > UINT64_MAX - ms)
			return -ERANGE;
		total += ms;
		parts++;
	}
	*out_ms = total;
	return 0;
}

int wr_parse_cpus(const char *text, uint64_t *out_millicpus)
{
	if (!text || !*text)
		return -EINVAL;
	const char *p = text;
	struct decimal value;
	int r = parse_decimal(&p, &value);
	if (r < 0)
		return r;
	if (*p)
		return -EINVAL;
	if (value.whole > 1024 || (value.whole == 1024 && value.milli > 0))
		return -ERANGE;
	uint64_t milli = value.whole * 1000 + value.milli;
	if (milli == 0)
		return -ERANGE;
	*out_millicpus = milli;
	return 0;
}

int wr_parse_uint(const char *text, uint64_t min, uint64_t max, uint64_t *out)
{
	if (!text || !*text)
		return -EINVAL;
	uint64_t v = 0;
	for (const char *p = text; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -EINVAL;
		uint64_t d = (uint64_t)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

int wr_validate_name(const char *name)
{
	if (!name || !*name)
		return -EINVAL;
	size_t len = strlen(name);
	if (len > 63)
		return -ENAMETOOLONG;
	if (!isalnum((unsigned char)name[0]))
		return -EINVAL;
	for (size_t i = 1; i < len; i++) {
		unsigned char c = (unsigned char)name[i];
		if (!isalnum(c) && c != '_' && c != '.' && c != '-')
			return -EINVAL;
	}
	return 0;
}
