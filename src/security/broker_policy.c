/* broker_policy.c - the credential broker's pure parts (broker.h): tokens,
 * the client's header, ref names and the push policy, pkt-lines. No I/O
 * beyond libsodium's random bytes. */
#include "security/broker.h"

#include <errno.h>
#include <sodium.h>
#include <stdio.h>
#include <string.h>

/* ---- tokens -------------------------------------------------------------- */

int broker_token_new(char out[BROKER_TOKEN_MAX + 1])
{
	if (sodium_init() < 0)
		return -EIO;
	unsigned char raw[32];
	char b64[sodium_base64_ENCODED_LEN(
	    sizeof(raw), sodium_base64_VARIANT_URLSAFE_NO_PADDING)];
	randombytes_buf(raw, sizeof(raw));
	sodium_bin2base64(b64, sizeof(b64), raw, sizeof(raw),
			  sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	snprintf(out, BROKER_TOKEN_MAX + 1, "wrb_%s", b64);
	sodium_memzero(raw, sizeof(raw));
	sodium_memzero(b64, sizeof(b64));
	return 0;
}

void broker_token_hash(const char *token,
		       unsigned char out[BROKER_TOKEN_HASH_BYTES])
{
	crypto_hash_sha256(out, (const unsigned char *)token, strlen(token));
}

bool broker_token_hash_equal(const unsigned char *a, const unsigned char *b)
{
	return sodium_memcmp(a, b, BROKER_TOKEN_HASH_BYTES) == 0;
}

/* ---- the header ---------------------------------------------------------- */

static const char *const service_names[BROKER_SERVICE_MAX] = {
    [BROKER_UPLOAD_PACK] = "git-upload-pack",
    [BROKER_RECEIVE_PACK] = "git-receive-pack",
};

const char *broker_service_name(enum broker_service s)
{
	return s < BROKER_SERVICE_MAX ? service_names[s] : "?";
}

static bool token_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '_' || c == '-';
}

int broker_header_parse(const char *line, size_t len, struct broker_header *out,
			const char **why)
{
	static const char magic[] = BROKER_MAGIC " ";
	if (len < sizeof(magic) - 1 || memcmp(line, magic, sizeof(magic) - 1)) {
		*why = "not a warren-broker/1 client";
		return -EBADMSG;
	}
	const char *p = line + sizeof(magic) - 1, *end = line + len;
	const char *sp = memchr(p, ' ', (size_t)(end - p));
	if (!sp) {
		*why = "no token";
		return -EBADMSG;
	}
	int service = -1;
	for (int i = 0; i < BROKER_SERVICE_MAX; i++)
		if ((size_t)(sp - p) == strlen(service_names[i]) &&
		    !memcmp(p, service_names[i], (size_t)(sp - p)))
			service = i;
	if (service < 0) {
		*why = "unknown service (git-upload-pack or git-receive-pack)";
		return -EBADMSG;
	}
	const char *tok = sp + 1;
	size_t tlen = (size_t)(end - tok);
	if (tlen == 0 || tlen > BROKER_TOKEN_MAX) {
		*why = "no token, or a token too long";
		return -EBADMSG;
	}
	for (size_t i = 0; i < tlen; i++)
		if (!token_char(tok[i])) {
			*why = "a token has only [A-Za-z0-9_-]";
			return -EBADMSG;
		}
	out->service = (enum broker_service)service;
	memcpy(out->token, tok, tlen);
	out->token[tlen] = '\0';
	return 0;
}

/* ---- refs ---------------------------------------------------------------- */

bool broker_refname_valid(const char *ref)
{
	size_t len = strlen(ref);
	if (len <= 5 || len > BROKER_REF_MAX || strncmp(ref, "refs/", 5) ||
	    ref[len - 1] == '/' || ref[len - 1] == '.')
		return false;
	if (strstr(ref, "..") || strstr(ref, "@{") || strstr(ref, "//"))
		return false;
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)ref[i];
		if (c < 0x20 || c == 0x7f || strchr(" ~^:?*[\\", c))
			return false;
	}
	/* each component: not empty (checked: no "//", no trailing '/'),
	 * not starting with '.', not ending in ".lock" */
	for (const char *comp = ref; *comp;) {
		const char *slash = strchr(comp, '/');
		size_t n = slash ? (size_t)(slash - comp) : strlen(comp);
		if (comp[0] == '.')
			return false;
		if (n >= 5 && !memcmp(comp + n - 5, ".lock", 5))
			return false;
		comp += n + (slash ? 1 : 0);
	}
	return true;
}

bool broker_ref_in_namespace(const char *session_id, const char *ref)
{
	static const char prefix[] = "refs/heads/warren/";
	size_t pl = sizeof(prefix) - 1, il = strlen(session_id);
	if (il == 0 || strncmp(ref, prefix, pl) ||
	    strncmp(ref + pl, session_id, il))
		return false;
	/* the branch itself, or below it: never a longer id that merely
	 * starts with this one (warren/s-1 is not warren/s-12) */
	char next = ref[pl + il];
	return next == '\0' || (next == '/' && ref[pl + il + 1] != '\0');
}

bool broker_oid_valid(const char *oid)
{
	size_t n = strlen(oid);
	if (n != 40 && n != 64)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((oid[i] >= '0' && oid[i] <= '9') ||
		      (oid[i] >= 'a' && oid[i] <= 'f')))
			return false;
	return true;
}

bool broker_oid_is_zero(const char *oid)
{
	if (!*oid)
		return false;
	for (; *oid; oid++)
		if (*oid != '0')
			return false;
	return true;
}

int broker_command_parse(const char *line, size_t len,
			 struct broker_command *out)
{
	if (len > 0 && line[len - 1] == '\n')
		len--;
	/* no NUL anywhere: each field is used as a C string */
	if (memchr(line, '\0', len))
		return -EBADMSG;
	const char *end = line + len;
	const char *sp1 = memchr(line, ' ', len);
	const char *sp2 =
	    sp1 ? memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1)) : NULL;
	if (!sp1 || !sp2)
		return -EBADMSG;
	size_t ol = (size_t)(sp1 - line), nl = (size_t)(sp2 - sp1 - 1),
	       rl = (size_t)(end - sp2 - 1);
	if (ol > BROKER_OID_MAX || nl > BROKER_OID_MAX || ol != nl || rl == 0 ||
	    rl > BROKER_REF_MAX)
		return -EBADMSG;
	struct broker_command c;
	memcpy(c.old_oid, line, ol);
	c.old_oid[ol] = '\0';
	memcpy(c.new_oid, sp1 + 1, nl);
	c.new_oid[nl] = '\0';
	memcpy(c.ref, sp2 + 1, rl);
	c.ref[rl] = '\0';
	if (!broker_oid_valid(c.old_oid) || !broker_oid_valid(c.new_oid))
		return -EBADMSG;
	*out = c;
	return 0;
}

int broker_command_check(const char *session_id,
			 const struct broker_command *cmd, char *why,
			 size_t why_size)
{
	if (!broker_refname_valid(cmd->ref)) {
		snprintf(why, why_size, "warren broker: not a valid ref name");
		return -EACCES;
	}
	if (!broker_ref_in_namespace(session_id, cmd->ref)) {
		snprintf(why, why_size,
			 "warren broker: this session may push only to "
			 "refs/heads/warren/%s and below",
			 session_id);
		return -EACCES;
	}
	if (broker_oid_is_zero(cmd->new_oid)) {
		snprintf(why, why_size,
			 "warren broker: deleting a ref is not allowed");
		return -EACCES;
	}
	why[0] = '\0';
	return 0;
}

/* ---- pkt-lines ----------------------------------------------------------- */

int broker_pkt_len(const char hdr[4])
{
	int v = 0;
	for (int i = 0; i < 4; i++) {
		char c = hdr[i];
		int d = c >= '0' && c <= '9'   ? c - '0'
			: c >= 'a' && c <= 'f' ? c - 'a' + 10
			: c >= 'A' && c <= 'F' ? c - 'A' + 10
					       : -1;
		if (d < 0)
			return -EBADMSG;
		v = v * 16 + d;
	}
	if (v == 0 || v == 1 || v == 2)
		return v;
	if (v < 4 || v > BROKER_PKT_MAX)
		return -EBADMSG;
	return v;
}

int broker_pkt_format(char *buf, size_t size, const char *payload, size_t len)
{
	if (len + 4 > BROKER_PKT_MAX || len + 4 > size)
		return -E2BIG;
	char hdr[5];
	snprintf(hdr, sizeof(hdr), "%04zx", len + 4);
	memcpy(buf, hdr, 4);
	memcpy(buf + 4, payload, len);
	return (int)(len + 4);
}
