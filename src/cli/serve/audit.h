/* audit.h - `warren audit verify|export` (audit.c), run by warren-serve:
 * it reads the store. */
#ifndef WR_CLI_SERVE_AUDIT_H
#define WR_CLI_SERVE_AUDIT_H

/* argv[0] is "audit". Returns the exit status. */
int cmd_audit(int argc, char **argv);

#endif
