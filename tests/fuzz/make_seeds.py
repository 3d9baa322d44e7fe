#!/usr/bin/env python3
"""make_seeds.py - (re)generate the seed corpora in tests/fuzz/corpus/.

The files are committed; run this only to change them:
    python3 tests/fuzz/make_seeds.py
Proto seeds follow struct wr_proto_request_hdr (src/sandbox/proto.h), in the
byte order of the machines Warren runs on (little-endian)."""
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
MAGIC, VERSION, TTY = 0x57524E31, 1, 0x1


def request(cwd, argv, env, flags=0, rows=0, cols=0, magic=MAGIC,
            version=VERSION, argc=None, envc=None, strings_len=None,
            trailing=b""):
    strings = b"".join(s + b"\0" for s in [cwd] + argv + env) + trailing
    hdr = struct.pack("<IHHIIIHH", magic, version, flags,
                      len(argv) if argc is None else argc,
                      len(env) if envc is None else envc,
                      len(strings) if strings_len is None else strings_len,
                      rows, cols)
    return hdr + strings


def write(kind, name, data):
    d = os.path.join(HERE, "corpus", kind)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


PARSE = {
    "size_bytes": "4096", "size_k": "512K", "size_frac_g": "1.5G",
    "size_gib": "2GiB", "size_lower_m": "10m", "size_overflow": "16777216T",
    "size_max_t": "16777215T", "dur_bare": "90", "dur_s": "90s",
    "dur_ms": "1500ms", "dur_compound": "1h30m", "dur_all": "1d2h3m4s5ms",
    "dur_days_max": "213503982334d51951615ms", "cpus_half": "0.5",
    "cpus_max": "1024", "cpus_over": "1024.001", "uint_max": "18446744073709551615",
    "uint_over": "18446744073709551616", "name_ok": "web-1.box_2",
    "name_long": "a" * 64, "name_bad": "-a/b", "garbage": "1.2.3K ",
    "negative": "-1", "empty": "", "leading_dot": ".5", "utf8": "1\u00e4K",
}

PROTO = {
    "valid_basic": request(b"/work", [b"sh", b"-c", b"echo hi"],
                           [b"PATH=/usr/bin:/bin", b"HOME=/root"]),
    "valid_tty": request(b"/", [b"bash"], [b"TERM=xterm"], TTY, 24, 80),
    "valid_no_env": request(b"/tmp", [b"true"], []),
    "valid_empty_args": request(b"/", [b"printf", b"", b"x"], [b"A="]),
    "valid_many_args": request(b"/", [b"a"] * 200, [b"K=V"] * 50),
    "bad_magic": request(b"/", [b"ls"], [], magic=0x314E5257),
    "bad_version": request(b"/", [b"ls"], [], version=2),
    "bad_flags": request(b"/", [b"ls"], [], flags=0x8001),
    "argc_zero": request(b"/", [], [b"A=1"]),
    "argc_over_cap": request(b"/", [b"ls"], [], argc=4097),
    "argc_beyond_strings": request(b"/", [b"ls"], [b"A=1"], argc=3),
    "envc_beyond_strings": request(b"/", [b"ls"], [b"A=1"], envc=2),
    "strings_len_short": request(b"/", [b"ls"], [], strings_len=3),
    "strings_len_huge": request(b"/", [b"ls"], [], strings_len=0xFFFFFFFF),
    "trailing_bytes": request(b"/", [b"ls"], [b"A=1"], trailing=b"x\0"),
    "env_no_equals": request(b"/", [b"ls"], [b"PATH"]),
    "env_leading_equals": request(b"/", [b"ls"], [b"=x"]),
    "relative_cwd": request(b"work", [b"ls"], []),
    "empty_argv0": request(b"/", [b""], []),
    "truncated": request(b"/work", [b"sh", b"-c", b"x"], [b"A=1"])[:37],
    "header_only": request(b"/", [b"ls"], [])[:24],
    "short": b"WRN",
    # for the build-from-strings half: control byte, then cwd\0argv..\0env..
    "strings_valid": b"\x82/srv\0python3\0-c\0print(1)\0LANG=C",
    "strings_relative": b"\x01srv\0ls\0A=1",
}

if __name__ == "__main__":
    for name, text in PARSE.items():
        write("parse", name, text.encode())
    for name, data in PROTO.items():
        write("proto", name, data)
